"""prometheus-adapter argv (Helm chart, kube-prometheus manifests) parses; Go flag syntax works."""

import pytest

from adapter.flags import normalize_argv, parse_flags, parse_header_args
from shared.cli import parse_go_bool
from shared.durations import parse_go_duration

HELM_ARGV = [
    "/adapter",
    "--secure-port=6443",
    "--cert-dir=/tmp/cert",
    "--prometheus-url=http://prometheus.monitoring.svc:9090/",
    "--metrics-relist-interval=1m",
    "--v=4",
    "--config=/etc/adapter/config.yaml",
]


def test_helm_chart_argv() -> None:
    options, _, warnings = parse_flags(HELM_ARGV)
    assert options.serving.secure_port == 6443
    assert options.serving.cert_dir == "/tmp/cert"
    assert options.prometheus_url == "http://prometheus.monitoring.svc:9090/"
    assert options.relist_interval == 60
    assert options.max_age == 60  # defaults to the relist interval
    assert str(options.config) == "/etc/adapter/config.yaml"
    assert warnings == ["flag --v is ignored; use --log-level"]


def test_kube_prometheus_argv_with_removed_klog_flags_warns_instead_of_failing() -> None:
    argv = [
        "--secure-port=6443",
        "--tls-cert-file=/var/run/serving-cert/serving.crt",
        "--tls-private-key-file=/var/run/serving-cert/serving.key",
        "--logtostderr=true",
        "--alsologtostderr",
        "--log-dir",
        "/var/log",
        "--prometheus-url=http://prometheus.prom.svc:9090/",
        "--metrics-relist-interval=1m",
        "-v=10",
        "--config=/etc/adapter/config.yaml",
    ]
    options, _, warnings = parse_flags(argv)
    assert options.serving.tls_cert_file == "/var/run/serving-cert/serving.crt"
    assert options.serving.tls_private_key_file == "/var/run/serving-cert/serving.key"
    assert len(warnings) == 4
    assert any("--logtostderr was removed" in w for w in warnings)
    assert any("--log-dir was removed" in w for w in warnings)


@pytest.mark.parametrize(
    "flags",
    [
        # k8s.io/apiserver's feature options, which custom-metrics-apiserver adds to prometheus-adapter
        ["--profiling=false", "--contention-profiling", "--debug-socket-path=/tmp/debug.sock"],
        ["--enable-priority-and-fairness=false", "--enable-priority-and-fairness"],
        ["--debug-socket-path", "/tmp/debug.sock", "--enable-priority-and-fairness", "--profiling"],
        # serving and client options Surge has no use for
        ["--disable-http2", "--http2-max-streams-per-connection=100", "--permit-port-sharing=true"],
        ["--client-qps=20", "--client-burst", "40", "--permit-address-sharing"],
    ],
)
def test_upstream_flags_without_effect_are_accepted_with_a_warning_each(flags: list[str]) -> None:
    """A values file's extraArguments may carry them; refusing one would crash-loop the pod."""
    options, _, warnings = parse_flags(["--config=c.yaml", *flags, "--secure-port=6443"])
    assert options.serving.secure_port == 6443  # the flag after them still parses (no value swallowed)
    named = [flag.lstrip("-").partition("=")[0] for flag in flags if flag.startswith("--")]
    assert warnings == [f"flag --{name} has no effect in surge-adapter and is ignored" for name in named]


def test_space_separated_values_and_single_dash_long_flags() -> None:
    options, _, _ = parse_flags(
        [
            "-config",
            "rules.yaml",
            "--prometheus-url",
            "http://p:9090",
            "--metrics-max-age",
            "1h30m",
            "--metrics-relist-interval",
            "30s",
            "--v",
            "6",
        ]
    )
    assert str(options.config) == "rules.yaml"
    assert options.prometheus_url == "http://p:9090"
    assert options.max_age == 5400
    assert options.relist_interval == 30


def test_defaults_match_prometheus_adapter() -> None:
    options, _, _ = parse_flags(["--config=c.yaml"])
    assert options.prometheus_url == "https://localhost"
    assert options.relist_interval == 600
    assert options.serving.secure_port == 443
    assert options.serving.bind_address == "0.0.0.0"
    assert options.serving.cert_dir == "apiserver.local.config/certificates"
    assert options.prometheus_verb == "GET"
    assert options.serving.insecure_http is False
    assert options.regex_escape_values is False  # prometheus-adapter's rendering
    assert options.config_max_bytes == 1048576  # (Surge's) a ConfigMap's most


def test_go_bool_flags() -> None:
    options, _, _ = parse_flags(["--config=c", "--insecure-http"])
    assert options.serving.insecure_http is True
    options, _, _ = parse_flags(["--config=c", "--insecure-http=false"])
    assert options.serving.insecure_http is False
    options, _, _ = parse_flags(["--config=c", "--prometheus-auth-incluster=true"])
    assert options.prometheus_auth_incluster is True
    options, _, _ = parse_flags(["--config=c", "--regex-escape-values"])
    assert options.regex_escape_values is True
    options, _, _ = parse_flags(["--config=c", "-regex-escape-values=false"])
    assert options.regex_escape_values is False


def test_repeated_prometheus_headers() -> None:
    options, _, _ = parse_flags(
        ["--config=c", "--prometheus-header=X-Scope-OrgID=tenant", "--prometheus-header", "foo=bar=baz"]
    )
    assert options.prometheus_headers == (("X-Scope-Orgid", "tenant"), ("Foo", "bar=baz"))


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], ()),
        (["foo=bar"], (("Foo", "bar"),)),
        (["foo"], (("Foo", ""),)),
        (["foo=bar, foo=baz, bux=baz=23"], (("Foo", "bar"), ("Foo", "baz"), ("Bux", "baz=23"))),
    ],
)
def test_parse_header_args_like_the_anchor(values: list[str], expected: tuple[tuple[str, str], ...]) -> None:
    assert parse_header_args(values) == expected


@pytest.mark.parametrize(
    "argv",
    [
        [],  # --config is required
        ["--config=c", "--metrics-relist-interval=10m", "--metrics-max-age=1m"],
        ["--config=c", "--prometheus-auth-incluster", "--prometheus-auth-config=k"],
        ["--config=c", "--prometheus-client-tls-cert-file=a"],
        ["--config=c", "--secure-port=-1"],
        ["--config=c", "--prometheus-url=prometheus:9090"],  # no scheme: not a URL Prometheus answers
        ["--config=c", "--prometheus-verb=PUT"],
        ["--config=c", "--metrics-relist-interval=10"],  # Go durations need a unit
        ["--config=c", "--config-max-bytes=0"],
        ["--config=c", "--no-such-flag"],
        ["--config=c", "extra-positional"],
    ],
)
def test_invalid_argv_exits_with_usage_error(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_flags(argv)
    assert exit_info.value.code == 2


def test_leading_positional_is_dropped_only_at_the_front() -> None:
    args, _ = normalize_argv(["/adapter", "--config=c"])
    assert args == ["--config=c"]
    args, _ = normalize_argv(["--config=c", "/adapter"])
    assert args == ["--config=c", "/adapter"]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),
        ("1m", 60.0),
        ("1h30m", 5400.0),
        ("500ms", 0.5),
        ("1.5s", 1.5),
        ("2h", 7200.0),
        ("-1s", -1.0),
    ],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "10", "1d", "m", "1m x", "1.2.3s"])
def test_invalid_go_durations(text: str) -> None:
    with pytest.raises(ValueError):
        parse_go_duration(text)


def test_go_bools() -> None:
    assert parse_go_bool("T") is True
    assert parse_go_bool("0") is False
    with pytest.raises(ValueError):
        parse_go_bool("yes")
