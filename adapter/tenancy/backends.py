"""MetricBackend and ClusterMetricBackend: what a backend object may make the adapter call, and the
settings of the Prometheus client that calls it.

A backend is written by a tenant (MetricBackend) or the platform team (ClusterMetricBackend), and the
adapter calls it from inside the cluster with the credentials of a Secret. So nothing is taken on
trust: the URL must be one the admin allows (`--allowed-backend-urls`, matched against the whole URL
text, which must have a plain host and be written exactly as the client's parser reads it, so that the
pattern and the client cannot disagree about where a request goes); headers are single header lines,
never ones that change how the request is framed or routed, and `Authorization` only where the admin
allows it (`--allowed-backend-headers`); the client never follows a redirect; and none of the adapter's
own `--prometheus-*` credentials reach a tenant's URL.

Refusals are `BackendRefused`, whose `reason` is the object's `Ready=False` reason.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from yarl import URL

from adapter.prometheus import PrometheusClient, PrometheusSettings, QueryObserver
from adapter.tenancy.options import TenantOptions
from shared.durations import parse_go_duration
from shared.prometheus import check_header

BackendKind = Literal["MetricBackend", "ClusterMetricBackend"]
Reason = Literal["BackendRefused", "InvalidSpec", "SecretMissing"]

# A backend answers within this, or the reads waiting on it would hold the API server's requests.
MAX_TIMEOUT_SECONDS = 60.0

# RFC 9110 token characters: header names are written raw, so anything else could split the request.
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# The URL's host[:port], in the one spelling every parser reads alike (no userinfo, escapes or dots
# that are not separators), so that the host an allowlist pattern saw is the host the client calls.
_AUTHORITY = re.compile(r"(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:.]+\])(?::([0-9]{1,5}))?")
_URL = re.compile(r"(https?)://([^/]*)(/.*)?")
# Headers that frame or route the request (or are the client's to set): never a backend's.
_NEVER = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "host"}
    | {"content-length", "content-type"}
)
_ADMIN_ALLOWABLE = frozenset({"authorization"})


class BackendRefused(ValueError):
    """A backend the adapter will not call; `reason` is its Ready condition's reason: BackendRefused (a
    URL or header the admin did not allow), InvalidSpec (a malformed spec) or SecretMissing."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason: Reason = reason


@dataclass(frozen=True)
class BackendSpec:
    kind: BackendKind
    namespace: str  # "" for a ClusterMetricBackend
    name: str
    url: str
    default: bool
    headers: tuple[tuple[str, str], ...]
    timeout: float | None  # seconds; None: the adapter's --prometheus-timeout
    secret: tuple[str, str] | None  # (namespace, name) of the Secret holding every key below
    bearer_token_key: str = ""
    basic_auth: tuple[str, str] | None = None  # (username key, password key)
    tls_keys: tuple[str, str, str] = ("", "", "")  # (CA key, certificate key, private key key)


def _invalid(message: str) -> BackendRefused:
    return BackendRefused("InvalidSpec", message)


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _invalid(f"{where} must be an object")
    return value


def _string(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _invalid(f"{where} must be a string")
    return value


def _check_url(url: str, options: TenantOptions) -> None:
    if not url:
        raise _invalid("spec.url is required")
    # Parsers differ on spaces, control characters and backslashes; none belongs in a backend's URL.
    if any(not "!" <= c <= "~" or c == "\\" for c in url):
        raise _invalid(f"spec.url {url!r} holds a space, control character, backslash or non-ASCII letter")
    if "?" in url or "#" in url:
        raise _invalid("spec.url cannot have a query or fragment: the client would drop them")
    match = _URL.fullmatch(url)
    if match is None:
        raise _invalid(f"spec.url {url!r} is not an http:// or https:// URL")
    authority = match.group(2)
    if "@" in authority:
        raise _invalid("spec.url must not hold credentials: put them in a Secret named by spec.auth")
    host_port = _AUTHORITY.fullmatch(authority)
    if host_port is None or not 0 < int(host_port.group(1) or "1") <= 65535:
        raise _invalid(f"spec.url: {authority!r} is not a plain host name or address with an optional port")
    # The client resolves dot segments and escapes and lowercases the host (yarl): the URL must already
    # read so, or the pattern would allow a text and the client call another path or host.
    try:
        read = str(URL(url))
    except ValueError as err:
        raise _invalid(f"spec.url {url!r}: {err}") from None
    if read != url:
        raise _invalid(f"spec.url {url!r} reads as {read!r}: write it that way")
    if not options.url_allowed(url):
        if not options.allowed_backend_urls:
            message = "no backend URL is allowed: the adapter's admin lists them in --allowed-backend-urls"
        else:
            message = f"spec.url {url!r} matches none of the adapter's --allowed-backend-urls"
        raise BackendRefused("BackendRefused", message)


def _headers(value: Any, options: TenantOptions) -> tuple[tuple[str, str], ...]:
    headers = []
    seen: set[str] = set()
    for name, text in _mapping(value, "spec.headers").items():
        header_value = _string(text, f"spec.headers.{name}")
        if not isinstance(name, str) or _TOKEN.fullmatch(name) is None:
            raise _invalid(f"spec.headers: {name!r} is not a header name")
        try:
            check_header(name, header_value)
        except ValueError as err:
            raise _invalid(f"spec.headers: {err}") from None
        lower = name.lower()
        if lower in _NEVER or lower.startswith("proxy-"):
            raise BackendRefused("BackendRefused", f"spec.headers: {name} is never a backend's to set")
        if lower in _ADMIN_ALLOWABLE and lower not in options.allowed_backend_headers:
            message = (
                f"spec.headers: {name} is refused unless the admin names it in --allowed-backend-headers"
            )
            raise BackendRefused("BackendRefused", message)
        if lower in seen:
            raise _invalid(f"spec.headers: {name} is set twice")
        seen.add(lower)
        headers.append((name, header_value))
    return tuple(headers)


def _timeout(value: Any) -> float | None:
    text = _string(value, "spec.timeout")
    if not text:
        return None
    try:
        seconds = parse_go_duration(text)
    except ValueError:
        raise _invalid(f"spec.timeout {text!r} is not a duration like 10s") from None
    if not 0 < seconds <= MAX_TIMEOUT_SECONDS:
        raise _invalid(f"spec.timeout {text!r} must be more than 0s and at most {MAX_TIMEOUT_SECONDS:g}s")
    return seconds


def _secret_ref(kind: BackendKind, namespace: str, ref: Mapping[str, Any]) -> tuple[str, str]:
    name = _string(ref.get("name"), "spec.auth.secretRef.name")
    ref_namespace = _string(ref.get("namespace"), "spec.auth.secretRef.namespace")
    if not name:
        raise _invalid("spec.auth.secretRef.name is required")
    if kind == "MetricBackend":
        # A tenant reads its own namespace's Secrets only.
        if ref_namespace and ref_namespace != namespace:
            raise _invalid("spec.auth.secretRef of a MetricBackend names a Secret of its own namespace")
        return namespace, name
    if not ref_namespace:
        raise _invalid("spec.auth.secretRef.namespace is required in a ClusterMetricBackend")
    return ref_namespace, name


def _kind(obj: Mapping[str, Any], namespace: str) -> BackendKind:
    """The object's kind; list items may come without one, and then the scope tells."""
    kind = obj.get("kind") or ("MetricBackend" if namespace else "ClusterMetricBackend")
    if kind == "MetricBackend" and namespace:
        return "MetricBackend"
    if kind == "ClusterMetricBackend" and not namespace:
        return "ClusterMetricBackend"
    raise _invalid(f"a {kind} {'in' if namespace else 'without'} a namespace is not a backend")


@dataclass(frozen=True)
class _Auth:
    secret: tuple[str, str] | None
    bearer_token_key: str
    basic_auth: tuple[str, str] | None
    tls_keys: tuple[str, str, str]


def _auth(kind: BackendKind, namespace: str, value: Any, authorization_header: bool) -> _Auth:
    auth = _mapping(value, "spec.auth")
    token_key = _string(auth.get("bearerTokenKey"), "spec.auth.bearerTokenKey")
    basic = _mapping(auth.get("basicAuth"), "spec.auth.basicAuth")
    username_key, password_key = (
        _string(basic.get(k), f"spec.auth.basicAuth.{k}") for k in ("usernameKey", "passwordKey")
    )
    tls = _mapping(auth.get("tls"), "spec.auth.tls")
    ca_key, cert_key, key_key = (
        _string(tls.get(k), f"spec.auth.tls.{k}") for k in ("caKey", "certKey", "keyKey")
    )
    if bool(username_key) != bool(password_key):
        raise _invalid("spec.auth.basicAuth needs both usernameKey and passwordKey")
    if token_key and username_key:
        raise _invalid("spec.auth: bearerTokenKey and basicAuth exclude each other")
    if bool(cert_key) != bool(key_key):
        raise _invalid("spec.auth.tls needs both certKey and keyKey, or neither")
    if (token_key or username_key) and authorization_header:
        raise _invalid("spec.headers.Authorization and spec.auth credentials exclude each other")
    reads_keys = bool(token_key or username_key or ca_key or cert_key)
    secret = None
    if "secretRef" in auth:
        if not reads_keys:
            raise _invalid("spec.auth.secretRef is named but no key of it is read")
        secret = _secret_ref(kind, namespace, _mapping(auth["secretRef"], "spec.auth.secretRef"))
    elif reads_keys:
        raise _invalid("spec.auth names Secret keys without a secretRef")
    basic_auth = (username_key, password_key) if username_key else None
    return _Auth(secret, token_key, basic_auth, (ca_key, cert_key, key_key))


def parse_backend(obj: Mapping[str, Any], options: TenantOptions) -> BackendSpec:
    """The backend an API object (as the API server returns it) describes; raises BackendRefused."""
    metadata = _mapping(obj.get("metadata"), "metadata")
    namespace = _string(metadata.get("namespace"), "metadata.namespace")
    kind = _kind(obj, namespace)
    spec = _mapping(obj.get("spec"), "spec")
    url = _string(spec.get("url"), "spec.url")
    _check_url(url, options)
    default = spec.get("default", False)
    if not isinstance(default, bool):
        raise _invalid("spec.default must be true or false")
    headers = _headers(spec.get("headers"), options)
    if options.namespace_header and kind == "MetricBackend":
        pinned = options.namespace_header
        if any(name.lower() == pinned.lower() for name, _ in headers):
            raise BackendRefused(
                "BackendRefused",
                f"spec.headers: {pinned} is the adapter's to set to the namespace "
                "(--backend-namespace-header)",
            )
        headers = (*headers, (pinned, namespace))
    authorization_header = any(name.lower() == "authorization" for name, _ in headers)
    auth = _auth(kind, namespace, spec.get("auth"), authorization_header)
    return BackendSpec(
        kind=kind,
        namespace=namespace,
        name=_string(metadata.get("name"), "metadata.name"),
        url=url,
        default=default,
        headers=headers,
        timeout=_timeout(spec.get("timeout")),
        secret=auth.secret,
        bearer_token_key=auth.bearer_token_key,
        basic_auth=auth.basic_auth,
        tls_keys=auth.tls_keys,
    )


def _secret_text(spec: BackendSpec, data: Mapping[str, bytes], key: str) -> str:
    assert spec.secret is not None
    where = f"key {key!r} of Secret {spec.secret[0]}/{spec.secret[1]}"
    if key not in data:
        raise BackendRefused("SecretMissing", f"{where} does not exist")
    try:
        return data[key].decode("utf-8")
    except UnicodeDecodeError:
        raise _invalid(f"{where} is not UTF-8 text") from None


def backend_settings(
    spec: BackendSpec, secret_data: Mapping[str, bytes] | None, base: PrometheusSettings
) -> PrometheusSettings:
    """The client settings of a backend: how to query from `base` (the adapter's --prometheus-url
    settings: verb, pool size, longest GET URL), where and with which headers and timeout from `spec`,
    credentials from `secret_data` (the Secret's decoded data, None when there is no such Secret), and
    never `base`'s own credentials. Raises BackendRefused (SecretMissing, InvalidSpec)."""
    token = ""
    basic_auth = None
    ca = cert = key = ""
    if spec.secret is not None:
        if secret_data is None:
            raise BackendRefused("SecretMissing", f"Secret {spec.secret[0]}/{spec.secret[1]} does not exist")
        if spec.bearer_token_key:
            # Written with `echo` or a YAML block, a token file usually ends with a newline.
            token = _secret_text(spec, secret_data, spec.bearer_token_key).strip()
            if not token or any(c in token for c in "\r\n\0"):
                raise _invalid(f"the bearer token of key {spec.bearer_token_key!r} is empty or not one line")
        if spec.basic_auth is not None:
            username, password = (_secret_text(spec, secret_data, k) for k in spec.basic_auth)
            if ":" in username:
                raise _invalid("a basic auth username cannot hold a colon")
            basic_auth = (username, password)
        ca, cert, key = (_secret_text(spec, secret_data, k) if k else "" for k in spec.tls_keys)
    return PrometheusSettings(
        url=spec.url,
        verb=base.verb,
        timeout=base.timeout if spec.timeout is None else spec.timeout,
        token=token,
        headers=spec.headers,
        max_get_url_length=base.max_get_url_length,
        pool_size=base.pool_size,
        basic_auth=basic_auth,
        ca_pem=ca,
        client_cert_pem=cert,
        client_key_pem=key,
        follow_redirects=False,
    )


def backend_client(settings: PrometheusSettings, observe: QueryObserver | None = None) -> PrometheusClient:
    """The client of a backend (built in the event loop; `close()` it when done). Raises BackendRefused
    (InvalidSpec) when the TLS data of its Secret does not load."""
    try:
        return PrometheusClient(settings, observe)
    except (ssl.SSLError, OSError, ValueError) as err:
        raise _invalid(f"the backend's TLS data or credentials do not load: {err}") from None
