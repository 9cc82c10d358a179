"""Authenticator order and failure rules (front proxy → client cert → token → anonymous)."""

import asyncio
import datetime as dt

import pytest
from cryptography.x509.oid import ExtendedKeyUsageOID
from multidict import CIMultiDict

from shared.auth.authenticator import AuthenticationFailed, Authenticator, CachingTokenReviewer, bearer_token
from shared.auth.cache import TTLCache
from shared.auth.certs import CertificateAuthority
from shared.auth.configmap import AuthenticationSources
from shared.auth.identity import ANONYMOUS, UserInfo
from shared.auth.requestheader import RequestHeaderConfig
from tests.security.pki import TestCA

FRONT_PROXY_CA = TestCA("front-proxy-ca")
CLIENT_CA = TestCA("client-ca")
OTHER_CA = TestCA("other-ca")


def sources(
    allowed: tuple[str, ...] = ("front-proxy-client",), client_ca: bool = True
) -> AuthenticationSources:
    return AuthenticationSources(
        client_ca=CertificateAuthority.from_pem(CLIENT_CA.pem) if client_ca else None,
        request_header=RequestHeaderConfig(
            ca=CertificateAuthority.from_pem(FRONT_PROXY_CA.pem),
            allowed_names=allowed,
            username_headers=("X-Remote-User",),
            uid_headers=(),
            group_headers=("X-Remote-Group",),
            extra_prefixes=("X-Remote-Extra-",),
        ),
    )


class Reviews:
    """Answers like a kube-apiserver whose only valid token is `good`; counts calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def __call__(self, token: str) -> UserInfo | None:
        self.calls.append(token)
        if token == "broken":
            raise ConnectionError("apiserver unreachable")
        return (
            UserInfo("system:serviceaccount:ns:sa", groups=("system:serviceaccounts",))
            if token == "good"
            else None
        )


PROXY_HEADERS = CIMultiDict([("X-Remote-User", "alice"), ("X-Remote-Group", "devs")])


async def test_front_proxy_certificate_makes_headers_trusted() -> None:
    authn = Authenticator(sources, Reviews())
    user = await authn.authenticate([FRONT_PROXY_CA.issue("front-proxy-client").cert], PROXY_HEADERS)
    assert user == UserInfo("alice", groups=("devs", "system:authenticated"))


async def test_headers_without_certificate_are_ignored() -> None:
    user = await Authenticator(sources, Reviews()).authenticate([], PROXY_HEADERS)
    assert user == ANONYMOUS


async def test_wrong_cn_with_allowed_list_fails_and_empty_list_allows_any_cn() -> None:
    chain = [FRONT_PROXY_CA.issue("not-the-proxy").cert]
    with pytest.raises(AuthenticationFailed, match="not in the allowed list"):
        await Authenticator(lambda: sources(client_ca=False), Reviews()).authenticate(chain, PROXY_HEADERS)
    user = await Authenticator(lambda: sources(allowed=()), Reviews()).authenticate(chain, PROXY_HEADERS)
    assert user.name == "alice"


async def test_certificate_from_another_ca_fails() -> None:
    with pytest.raises(AuthenticationFailed):
        await Authenticator(sources, Reviews()).authenticate(
            [OTHER_CA.issue("front-proxy-client").cert], PROXY_HEADERS
        )


async def test_certificate_from_another_ca_with_a_valid_token_is_the_token_user() -> None:
    # Upstream's union: the failed x509 authenticators are forgotten once the bearer token succeeds.
    headers = CIMultiDict([*PROXY_HEADERS.items(), ("Authorization", "Bearer good")])
    stranger = [OTHER_CA.issue("front-proxy-client").cert]
    user = await Authenticator(sources, Reviews()).authenticate(stranger, headers)
    assert user.name == "system:serviceaccount:ns:sa"


async def test_remembered_verdict_does_not_outlive_the_intermediate() -> None:
    expires = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1)
    intermediate = TestCA("short-lived-intermediate", parent=CLIENT_CA, expires=expires)
    chain = [intermediate.issue("carol").cert, intermediate.cert]
    same_cas = sources(allowed=())  # one CertificateAuthority throughout, so its remembered verdicts count
    authn = Authenticator(lambda: same_cas, Reviews())
    assert (await authn.authenticate(chain, CIMultiDict())).name == "carol"
    # X.509 times have whole seconds and the last one is still valid.
    end = intermediate.cert.not_valid_after_utc + dt.timedelta(seconds=1)
    await asyncio.sleep((end - dt.datetime.now(dt.UTC)).total_seconds() + 0.05)
    with pytest.raises(AuthenticationFailed, match=r"client certificate: .* not valid at validation time"):
        await authn.authenticate(chain, CIMultiDict())


async def test_server_only_certificate_is_not_a_client_certificate() -> None:
    cert = FRONT_PROXY_CA.issue("front-proxy-client", usages=(ExtendedKeyUsageOID.SERVER_AUTH,)).cert
    with pytest.raises(AuthenticationFailed):
        await Authenticator(lambda: sources(client_ca=False), Reviews()).authenticate([cert], PROXY_HEADERS)


async def test_expired_certificate_fails() -> None:
    cert = FRONT_PROXY_CA.issue("front-proxy-client", expired=True).cert
    with pytest.raises(AuthenticationFailed):
        await Authenticator(lambda: sources(client_ca=False), Reviews()).authenticate([cert], PROXY_HEADERS)


async def test_intermediate_presented_by_the_client_is_used() -> None:
    intermediate = TestCA("front-proxy-intermediate", parent=FRONT_PROXY_CA)
    chain = [intermediate.issue("front-proxy-client").cert, intermediate.cert]
    user = await Authenticator(sources, Reviews()).authenticate(chain, PROXY_HEADERS)
    assert user.name == "alice"
    with pytest.raises(AuthenticationFailed):
        await Authenticator(sources, Reviews()).authenticate(chain[:1], PROXY_HEADERS)


async def test_client_certificate_user_is_cn_and_groups_are_o() -> None:
    cert = CLIENT_CA.issue("carol", orgs=("ops", "system:masters")).cert
    user = await Authenticator(sources, Reviews()).authenticate([cert], CIMultiDict())
    assert user == UserInfo("carol", groups=("ops", "system:masters", "system:authenticated"))


async def test_front_proxy_cert_without_username_falls_through_to_client_ca_error() -> None:
    # Upstream: the request-header authenticator does not apply, the client-CA one fails → 401.
    chain = [FRONT_PROXY_CA.issue("front-proxy-client").cert]
    with pytest.raises(AuthenticationFailed):
        await Authenticator(sources, Reviews()).authenticate(chain, CIMultiDict())
    # Without a client CA nothing applies, so the caller is anonymous.
    user = await Authenticator(lambda: sources(client_ca=False), Reviews()).authenticate(chain, CIMultiDict())
    assert user == ANONYMOUS


async def test_bearer_tokens() -> None:
    reviews = Reviews()
    authn = Authenticator(sources, reviews)
    user = await authn.authenticate([], CIMultiDict([("Authorization", "Bearer good")]))
    assert user.groups == ("system:serviceaccounts", "system:authenticated")
    with pytest.raises(AuthenticationFailed, match="invalid bearer token"):
        await authn.authenticate([], CIMultiDict([("Authorization", "Bearer bad")]))
    with pytest.raises(AuthenticationFailed, match="unreachable"):
        await authn.authenticate([], CIMultiDict([("Authorization", "Bearer broken")]))
    assert await authn.authenticate([], CIMultiDict([("Authorization", "Basic abc")])) == ANONYMOUS
    assert reviews.calls == ["good", "bad", "broken"]


def test_bearer_token_parsing() -> None:
    assert bearer_token("Bearer abc") == "abc"
    assert bearer_token("  bearer abc  ") == "abc"
    assert bearer_token("Bearer  abc") == ""  # the space-before-token case upstream ignores
    assert bearer_token("Bearer") == ""
    assert bearer_token("Bearer abc def") == "abc"


async def test_token_cache_keeps_answers_but_not_errors() -> None:
    now = [0.0]
    reviews = Reviews()
    cached = CachingTokenReviewer(reviews, ttl=10.0, cache=TTLCache(100, lambda: now[0]))
    for _ in range(3):
        assert (await cached("good")) is not None
        assert (await cached("bad")) is None
        with pytest.raises(ConnectionError):
            await cached("broken")
    assert reviews.calls == ["good", "bad", "broken", "broken", "broken"]
    now[0] = 10.0
    await cached("good")
    assert reviews.calls[-1] == "good"
