"""Calls to the kube-apiserver that delegated authn/authz needs: TokenReview, SubjectAccessReview and
reading the front-proxy ConfigMap. Each call has a 10 s timeout and upstream's retry backoff.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

import aiohttp
from kubernetes_asyncio import client, config

from adapter.auth.authorizer import AuthorizationError, Decision
from adapter.auth.configmap import CONFIGMAP_NAME, CONFIGMAP_NAMESPACE
from adapter.auth.identity import UserInfo

_TIMEOUT_SECONDS = 10.0


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


async def api_client_for(kubeconfig: str) -> client.ApiClient:
    """A client from a kubeconfig file, or from the pod's service account when the path is empty."""
    configuration = client.Configuration()
    if kubeconfig:
        await config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    else:
        config.load_incluster_config(client_configuration=configuration)
    return client.ApiClient(configuration=configuration)


def _retriable(status: int) -> bool:
    return status == 429 or status >= 500


def _raw(
    method: Callable[..., Awaitable[object]], *args: object
) -> Callable[[], Awaitable[aiohttp.ClientResponse]]:
    """A sender for `_call`: `method(*args)` answering with the raw response rather than the decoded model.

    kubernetes_asyncio's stubs give each API method its model as the body and as the result. At run time
    it also serializes a plain JSON dict body, and `_preload_content=False` makes it return the aiohttp
    response unread; the `Callable[..., ...]` parameter and the cast say so to the type checker.
    """

    async def send() -> aiohttp.ClientResponse:
        return cast(aiohttp.ClientResponse, await method(*args, _preload_content=False))

    return send


async def _call(backoff: Backoff, send: Callable[[], Awaitable[aiohttp.ClientResponse]]) -> dict[str, Any]:
    """JSON body of a 2xx answer; retries connection failures, 429 and 5xx; ReviewError otherwise."""
    delays = backoff.delays()
    while True:
        try:
            response = await asyncio.wait_for(send(), _TIMEOUT_SECONDS)
            async with response:
                body = await response.read()
                status = response.status
        except (aiohttp.ClientError, TimeoutError) as err:
            failure = f"{type(err).__name__}: {err}"
            status = 0
            retriable = True
        else:
            if 200 <= status < 300:
                try:
                    return json.loads(body)
                except ValueError as err:
                    raise ReviewError(f"malformed answer: {err}") from None
            failure = f"HTTP {status}: {body[:200].decode(errors='replace')}"
            retriable = _retriable(status)
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


class TokenReviews:
    def __init__(self, api: client.ApiClient, backoff: Backoff) -> None:
        self._api = client.AuthenticationV1Api(api)
        self._backoff = backoff

    async def __call__(self, token: str) -> UserInfo | None:
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        answer = await _call(self._backoff, _raw(self._api.create_token_review, body))
        status = answer.get("status") or {}
        if not status.get("authenticated"):
            return None
        return _user_from_review(status)


class SubjectAccessReviews:
    def __init__(self, api: client.ApiClient, backoff: Backoff) -> None:
        self._api = client.AuthorizationV1Api(api)
        self._backoff = backoff

    async def __call__(self, spec: dict[str, Any]) -> Decision:
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        try:
            answer = await _call(self._backoff, _raw(self._api.create_subject_access_review, body))
        except ReviewError as err:
            raise AuthorizationError(str(err)) from None
        status = answer.get("status") or {}
        allowed, denied = bool(status.get("allowed")), bool(status.get("denied"))
        if allowed and denied:
            raise AuthorizationError("SubjectAccessReview answer is both allowed and denied")
        return Decision(allowed=allowed, reason=status.get("reason", ""))


async def read_authentication_configmap(api: client.ApiClient, backoff: Backoff) -> dict[str, str]:
    """The ConfigMap's data; empty when the cluster does not publish it (as upstream tolerates)."""
    core = client.CoreV1Api(api)
    try:
        answer = await _call(
            backoff, _raw(core.read_namespaced_config_map, CONFIGMAP_NAME, CONFIGMAP_NAMESPACE)
        )
    except ReviewError as err:
        if err.status == 404:
            return {}
        raise
    return dict(answer.get("data") or {})
