"""Front-proxy header rules: first non-empty username, every group line, lower-cased unescaped extra keys."""

from multidict import CIMultiDict

from shared.auth.certs import CertificateAuthority
from shared.auth.configmap import AuthenticationSources, merge_sources, parse_configmap
from shared.auth.requestheader import RequestHeaderConfig, go_path_unescape, user_from_headers
from tests.security.pki import TestCA

CA = TestCA("front-proxy-ca")
CONFIG = RequestHeaderConfig(
    ca=CertificateAuthority.from_pem(CA.pem),
    allowed_names=(),
    username_headers=("X-Remote-User", "X-Other-User"),
    uid_headers=("X-Remote-Uid",),
    group_headers=("X-Remote-Group",),
    extra_prefixes=("X-Remote-Extra-",),
)


def test_user_groups_and_extra_from_headers() -> None:
    headers = CIMultiDict(
        [
            ("x-remote-user", "alice"),
            ("X-Remote-Group", "a"),
            ("X-Remote-Group", ""),
            ("X-Remote-Group", "b,c"),
            ("X-Remote-Extra-Authentication.kubernetes.io%2fcredential-Id", "JTI=1"),
            ("X-Remote-Extra-Scopes", "s1"),
            ("x-remote-extra-scopes", "s2"),
            ("X-Remote-Uid", "uid-1"),
        ]
    )
    user = user_from_headers(headers, CONFIG)
    assert user is not None
    assert user.name == "alice"
    assert user.uid == "uid-1"
    assert user.groups == ("a", "b,c")
    assert user.extra == {"authentication.kubernetes.io/credential-id": ("JTI=1",), "scopes": ("s1", "s2")}


def test_second_username_header_used_when_first_is_empty() -> None:
    headers = CIMultiDict([("X-Remote-User", ""), ("X-Other-User", "bob")])
    user = user_from_headers(headers, CONFIG)
    assert user is not None and user.name == "bob"


def test_no_username_header_means_not_applicable() -> None:
    assert user_from_headers(CIMultiDict([("X-Remote-Group", "system:masters")]), CONFIG) is None


def test_malformed_percent_escape_keeps_the_key() -> None:
    assert go_path_unescape("a%2fb") == "a/b"
    assert go_path_unescape("a%zzb") == "a%zzb"
    assert go_path_unescape("trailing%2") == "trailing%2"


def test_configmap_parsing_and_flag_precedence() -> None:
    other = TestCA("client-ca")
    data = {
        "client-ca-file": other.pem.decode(),
        "requestheader-client-ca-file": CA.pem.decode(),
        "requestheader-allowed-names": '["front-proxy-client"]',
        "requestheader-username-headers": '["X-Remote-User"]',
        "requestheader-group-headers": '["X-Remote-Group"]',
        "requestheader-extra-headers-prefix": '["X-Remote-Extra-"]',
    }
    cluster = parse_configmap(data)
    assert cluster.request_header is not None
    assert cluster.request_header.allowed_names == ("front-proxy-client",)
    assert cluster.request_header.uid_headers == ()
    assert cluster.client_ca == CertificateAuthority.from_pem(other.pem)
    flags = AuthenticationSources(client_ca=None, request_header=CONFIG)
    merged = merge_sources(flags, cluster)
    assert merged.request_header is CONFIG
    assert merged.client_ca == cluster.client_ca


def test_configmap_without_requestheader_ca_disables_front_proxy() -> None:
    assert parse_configmap({"requestheader-allowed-names": "[]"}) == AuthenticationSources(None, None)
