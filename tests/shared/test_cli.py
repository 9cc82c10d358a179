"""Command lines: every flag error is one line naming the flag, exit status 2; `--version` works.

The parsers are exercised in process (fast); a few cases from the issue also go through the real entry
points as subprocesses, where a traceback or a second line would show.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import subprocess
import sys
from collections.abc import Callable, Sequence

import pytest

from adapter.flags import FLAG_GROUPS, parse_flags
from autoscaler.flags import build_parser as autoscaler_parser
from autoscaler.options import parse_options
from demo.__main__ import main as demo_main
from shared.auth import add_auth_flags
from shared.cli import OneLineErrorParser, go_duration, http_url, integer, number, port_number, seconds
from sim.__main__ import parse_args as sim_parse_args

VERSION = importlib.metadata.version("surge")


def test_flag_error_is_one_line_naming_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    parser = OneLineErrorParser(prog="surge-x")
    parser.add_argument("--port", type=int)
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["--port", "eighty"])
    assert exited.value.code == 2
    assert capsys.readouterr().err == "surge-x: error: --port: invalid int value: 'eighty'\n"


@pytest.mark.parametrize(
    ("convert", "text", "expected"),
    [
        (port_number, "0", 0),
        (port_number, "65535", 65535),
        (http_url, "http://prometheus.monitoring.svc:9090/", "http://prometheus.monitoring.svc:9090/"),
        (http_url, "https://[::1]:8443", "https://[::1]:8443"),
        (seconds(), "1.5", 1.5),
        (seconds(), "1m30s", 90.0),
        (seconds(1.0), "1s", 1.0),
        (go_duration(), "0", 0.0),
        (go_duration(), "500ms", 0.5),
        (integer(1), "1", 1),
        (number(0), "0", 0.0),
    ],
)
def test_value_types_accept(convert: Callable[[str], object], text: str, expected: object) -> None:
    assert convert(text) == expected


@pytest.mark.parametrize(
    ("convert", "text", "message"),
    [
        (port_number, "abc", "'abc' is not a port number (0 to 65535)"),
        (port_number, "65536", "'65536' is not a port number (0 to 65535)"),
        (port_number, "-1", "'-1' is not a port number (0 to 65535)"),
        (http_url, "notaurl", "'notaurl' is not an http:// or https:// URL with a host"),
        (http_url, "ftp://host/", "'ftp://host/' is not an http:// or https:// URL with a host"),
        (http_url, "http://", "'http://' is not an http:// or https:// URL with a host"),
        (http_url, "http://host:99999", "'http://host:99999' is not an http:// or https:// URL with a host"),
        (http_url, "http://host:abc", "'http://host:abc' is not an http:// or https:// URL with a host"),
        (seconds(1.0), "500ms", "'500ms' is less than 1s"),
        (seconds(1.0), "0.5", "'0.5' is less than 1s"),
        (seconds(), "-1s", "'-1s' is less than 0s"),
        (seconds(), "inf", "'inf' is not a duration like 30s, 1m30s or 0.5"),
        (go_duration(), "10", "'10' is not a duration like 30s or 1m30s"),  # Go's flags need a unit
        (integer(1), "0", "'0' is less than 1"),
        (integer(1), "1.5", "'1.5' is not an integer"),
        (number(0), "-0.1", "'-0.1' is less than 0"),
        (number(0), "nan", "'nan' is not a number"),
    ],
)
def test_value_types_refuse_with_a_message_for_the_user(
    convert: Callable[[str], object], text: str, message: str
) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        convert(text)
    assert str(refused.value) == message


def _adapter(argv: Sequence[str]) -> object:
    return parse_flags(argv, (*FLAG_GROUPS, add_auth_flags))


def _autoscaler(argv: Sequence[str]) -> object:
    return autoscaler_parser().parse_args(argv)


def _autoscaler_options(argv: Sequence[str]) -> object:
    return parse_options(argv)  # with the checks across flags


def _sim(argv: Sequence[str]) -> object:
    return sim_parse_args(list(argv))


def _demo(argv: Sequence[str]) -> object:
    return demo_main(list(argv))  # a flag error exits before anything starts


@pytest.mark.parametrize(
    ("parse", "prog", "argv", "flag"),
    [
        (_adapter, "surge-adapter", ["--config=c", "--secure-port=abc"], "--secure-port"),
        (_adapter, "surge-adapter", ["--config=c", "--secure-port=65536"], "--secure-port"),
        (_adapter, "surge-adapter", ["--config=c", "--prometheus-url=notaurl"], "--prometheus-url"),
        (_adapter, "surge-adapter", ["--config=c", "--prometheus-url=file:///p"], "--prometheus-url"),
        (
            _adapter,
            "surge-adapter",
            ["--config=c", "--metrics-relist-interval=10"],
            "--metrics-relist-interval",
        ),
        (_adapter, "surge-adapter", ["--config=c", "--metrics-max-age=-1m"], "--metrics-max-age"),
        (_adapter, "surge-adapter", ["--config=c", "--prometheus-timeout=0s"], "--prometheus-timeout"),
        (
            _adapter,
            "surge-adapter",
            ["--config=c", "--authorization-webhook-cache-authorized-ttl=x"],
            "--authorization-webhook-cache-authorized-ttl",
        ),
        (_adapter, "surge-adapter", ["--prometheus-url=http://p:9090"], "--config"),
        (_autoscaler, "surge-autoscaler", ["--metrics-url=notaurl"], "--metrics-url"),
        (_autoscaler, "surge-autoscaler", ["--metrics-url=localhost:6443"], "--metrics-url"),
        (_autoscaler, "surge-autoscaler", ["--sync-period=500ms"], "--sync-period"),
        (_autoscaler, "surge-autoscaler", ["--sync-period=0"], "--sync-period"),
        (_autoscaler, "surge-autoscaler", ["--tolerance=-0.1"], "--tolerance"),
        (_autoscaler, "surge-autoscaler", ["--tolerance=lots"], "--tolerance"),
        (_autoscaler, "surge-autoscaler", ["--secure-port=65536"], "--secure-port"),
        (_autoscaler, "surge-autoscaler", ["--workers=abc"], "--workers"),
        (_autoscaler, "surge-autoscaler", ["--selector=app in (web"], "--selector"),
        (_autoscaler, "surge-autoscaler", ["--selector=-bad-key=x"], "--selector"),
        (_autoscaler, "surge-autoscaler", ["--workers=0"], "--workers"),
        (_autoscaler, "surge-autoscaler", ["--qps=-1"], "--qps"),
        (_autoscaler, "surge-autoscaler", ["--reconcile-deadline=soon"], "--reconcile-deadline"),
        (_autoscaler, "surge-autoscaler", ["--shutdown-grace-period=-5s"], "--shutdown-grace-period"),
        (
            _autoscaler_options,
            "surge-autoscaler",
            ["--prometheus-client-tls-cert-file=client.pem"],
            "--prometheus-client-tls-key-file",
        ),
        (
            _adapter,
            "surge-adapter",
            ["--config=c", "--prometheus-client-tls-key-file=client-key.pem"],
            "--prometheus-client-tls-cert-file",
        ),
        (
            _autoscaler_options,
            "surge-autoscaler",
            ["--leader-elect", "--leader-elect-lease-duration=5s", "--leader-elect-renew-deadline=10s"],
            "--leader-elect-renew-deadline",
        ),
        (
            _autoscaler_options,
            "surge-autoscaler",
            ["--leader-elect", "--qps=3", "--leader-elect-retry-period=500ms"],
            "--leader-elect-retry-period",
        ),
        # 10 buckets: 2 requests for each Lease and the membership Lease, and the list of members.
        (
            _autoscaler_options,
            "surge-autoscaler",
            ["--leader-elect", "--qps=10", "--leader-elect-buckets=10"],
            "--leader-elect-buckets 10",
        ),
        (_autoscaler_options, "surge-autoscaler", ["--leader-elect-buckets=3"], "--leader-elect-buckets"),
        (_autoscaler_options, "surge-autoscaler", ["--leader-elect-buckets=0"], "--leader-elect-buckets"),
        (_sim, "surge-sim", ["--kubeconfig=k", "--port=abc"], "--port"),
        (_sim, "surge-sim", ["--port=0"], "--kubeconfig"),
        (_demo, "python -m demo", ["--seconds=0"], "--seconds"),
        (_demo, "python -m demo", ["--profile=slow"], "--profile"),
        (_demo, "python -m demo", ["--log-level=loud"], "--log-level"),
    ],
)
def test_bad_flag_is_one_line_naming_it(
    parse: Callable[[Sequence[str]], object],
    prog: str,
    argv: list[str],
    flag: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{prog}: error: ") and flag in err, err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    # argparse's own `invalid <type name> value` is what named internals (`invalid _port value`).
    assert not re.search(r"invalid \w+ value", err), err


def test_help_shows_the_log_level_defaults_the_code_uses(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        demo_main(["--help"])
    assert "minimum level to log (default: warning" in " ".join(capsys.readouterr().out.split())
    parser = autoscaler_parser()
    assert parser.get_default("log_level") == "info"
    assert "(default: info)" in " ".join(parser.format_help().split())


def _run(module: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *argv],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize(
    ("module", "prog"),
    [("adapter", "surge-adapter"), ("autoscaler", "surge-autoscaler"), ("sim", "surge-sim")],
)
def test_version(module: str, prog: str) -> None:
    run = _run(module, "--version")
    assert (run.returncode, run.stdout, run.stderr) == (0, f"{prog} {VERSION}\n", "")


# The cases, through the real entry points: one line on stderr, nothing started.
@pytest.mark.parametrize(
    ("module", "argv", "expected"),
    [
        (
            "adapter",
            ["--config=c", "--secure-port=abc"],
            "surge-adapter: error: --secure-port: 'abc' is not a port number (0 to 65535)",
        ),
        (
            "adapter",
            ["--config=c", "--prometheus-url=notaurl"],
            "surge-adapter: error: --prometheus-url: 'notaurl' is not an http:// or https:// URL with a host",
        ),
        (
            "autoscaler",
            ["--metrics-url=notaurl"],
            "surge-autoscaler: error: --metrics-url: 'notaurl' is not an http:// or https:// URL with a host",
        ),
        (
            "autoscaler",
            ["--sync-period=500ms"],
            "surge-autoscaler: error: --sync-period: '500ms' is less than 1s",
        ),
        ("autoscaler", ["--tolerance=-0.1"], "surge-autoscaler: error: --tolerance: '-0.1' is less than 0"),
        (
            "sim",
            ["--kubeconfig=k", "--port=abc"],
            "surge-sim: error: --port: 'abc' is not a port number (0 to 65535)",
        ),
    ],
)
def test_entry_point_flag_error(module: str, argv: list[str], expected: str) -> None:
    run = _run(module, *argv)
    assert (run.returncode, run.stderr, run.stdout) == (2, expected + "\n", "")
