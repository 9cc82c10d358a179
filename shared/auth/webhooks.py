"""Calls to the kube-apiserver that delegated authn/authz needs: TokenReview, SubjectAccessReview and
reading the front-proxy ConfigMap, through shared.kube's client. Each call has a 10 s timeout and
upstream's retry backoff.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

from shared.auth.authorizer import AuthorizationError, Decision
from shared.auth.configmap import CONFIGMAP_NAME, CONFIGMAP_NAMESPACE
from shared.auth.identity import UserInfo
from shared.kube import ApiError, KubeClient, Obj

_TIMEOUT_SECONDS = 10.0
_TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
_SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
_CONFIGMAP = f"/api/v1/namespaces/{CONFIGMAP_NAMESPACE}/configmaps/{CONFIGMAP_NAME}"


class ReviewError(Exception):
    """The kube-apiserver could not be asked or answered with an error (`status` 0: no answer)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Backoff:
    """k8s.io/apiserver's DefaultAuthWebhookRetryBackoff: 500 ms, factor 1.5, jitter 0.2, 5 attempts."""

    initial: float = 0.5
    factor: float = 1.5
    jitter: float = 0.2
    attempts: int = 5

    def delays(self) -> list[float]:
        delays = []
        delay = self.initial
        for _ in range(self.attempts - 1):
            delays.append(delay * (1 + random.random() * self.jitter))
            delay *= self.factor
        return delays


def _retriable(status: int) -> bool:
    return status == 429 or status >= 500


async def _call(backoff: Backoff, send: Callable[[], Awaitable[Obj]]) -> Obj:
    """The JSON body of a 2xx answer; retries connection failures, 429 and 5xx; ReviewError otherwise."""
    delays = backoff.delays()
    while True:
        try:
            return await send()
        except ApiError as err:
            failure = f"HTTP {err.code}: {err.message[:200]}"
            status = err.code
            retriable = _retriable(status)
        except (aiohttp.ClientError, TimeoutError) as err:
            failure = f"{type(err).__name__}: {err}"
            status = 0
            retriable = True
        except ValueError as err:
            # An answer (2xx) all the same: one that asking again will not mend.
            raise ReviewError(f"malformed answer: {err}", 200) from None
        if not retriable or not delays:
            raise ReviewError(failure, status)
        await asyncio.sleep(delays.pop(0))


def _user_from_review(status: dict[str, Any]) -> UserInfo:
    user = status.get("user") or {}
    extra = user.get("extra") or {}
    return UserInfo(
        name=user.get("username", ""),
        uid=user.get("uid", ""),
        groups=tuple(user.get("groups") or ()),
        extra={key: tuple(values or ()) for key, values in extra.items()},
    )


def _sending(
    kube: KubeClient, method: str, path: str, body: Obj | None = None
) -> Callable[[], Awaitable[Obj]]:
    """A sender for `_call`: one request, bounded by the timeout."""

    async def send() -> Obj:
        return await kube.request(method, path, body=body, request_timeout=_TIMEOUT_SECONDS)

    return send


class TokenReviews:
    def __init__(self, kube: KubeClient, backoff: Backoff) -> None:
        self._kube = kube
        self._backoff = backoff

    async def __call__(self, token: str) -> UserInfo | None:
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        answer = await _call(self._backoff, _sending(self._kube, "POST", _TOKEN_REVIEWS, body))
        status = answer.get("status") or {}
        if not status.get("authenticated"):
            return None
        return _user_from_review(status)


class SubjectAccessReviews:
    def __init__(self, kube: KubeClient, backoff: Backoff) -> None:
        self._kube = kube
        self._backoff = backoff

    async def __call__(self, spec: dict[str, Any]) -> Decision:
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        try:
            answer = await _call(self._backoff, _sending(self._kube, "POST", _SUBJECT_ACCESS_REVIEWS, body))
        except ReviewError as err:
            raise AuthorizationError(str(err)) from None
        status = answer.get("status") or {}
        allowed, denied = bool(status.get("allowed")), bool(status.get("denied"))
        if allowed and denied:
            raise AuthorizationError("SubjectAccessReview answer is both allowed and denied")
        return Decision(allowed=allowed, reason=status.get("reason", ""))


async def read_authentication_configmap(kube: KubeClient, backoff: Backoff) -> dict[str, str]:
    """The ConfigMap's data; empty when the cluster does not publish it (as upstream tolerates)."""
    try:
        answer = await _call(backoff, _sending(kube, "GET", _CONFIGMAP))
    except ReviewError as err:
        if err.status == 404:
            return {}
        raise
    return dict(answer.get("data") or {})
