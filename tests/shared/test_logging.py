"""shared.logging: JSON lines on stderr for structlog and stdlib loggers, flags, validation."""

import argparse
import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from shared.logging import add_logging_flags, configure_logging


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()


def _json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_json_lines_from_structlog_and_stdlib(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info", "json")
    structlog.get_logger("surge.test").info("hello", replicas=3)
    logging.getLogger("some.library").warning("careful %s", "now")
    structlog.get_logger("surge.test").debug("hidden")
    records = _json_lines(capsys.readouterr().err)
    assert [r["event"] for r in records] == ["hello", "careful now"]
    assert [r["level"] for r in records] == ["info", "warning"]
    assert records[0]["replicas"] == 3
    assert records[1]["logger"] == "some.library"
    assert all("timestamp" in r for r in records)


def test_debug_level_and_exceptions(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("debug", "json")
    log = structlog.get_logger()
    log.debug("shown")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        log.exception("failed")
    records = _json_lines(capsys.readouterr().err)
    assert [r["level"] for r in records] == ["debug", "error"]
    assert "RuntimeError: boom" in records[1]["exception"]


def test_reconfigure_replaces_handler(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info", "json")
    configure_logging("error", "json")
    structlog.get_logger().warning("dropped")
    structlog.get_logger().error("kept")
    assert [r["event"] for r in _json_lines(capsys.readouterr().err)] == ["kept"]


def test_console_format_is_not_json(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info", "console")
    structlog.get_logger().info("human readable", key="value")
    err = capsys.readouterr().err
    assert "human readable" in err and "key" in err
    with pytest.raises(json.JSONDecodeError):
        json.loads(err.splitlines()[0])


def test_auto_is_json_when_stderr_is_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info", "auto")
    structlog.get_logger().info("piped")
    assert _json_lines(capsys.readouterr().err)[0]["event"] == "piped"


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError, match="log level"):
        configure_logging("verbose")
    with pytest.raises(ValueError, match="log format"):
        configure_logging("info", "xml")


def test_flags() -> None:
    parser = argparse.ArgumentParser()
    add_logging_flags(parser)
    assert vars(parser.parse_args([])) == {"log_level": "info", "log_format": "auto"}
    args = parser.parse_args(["--log-level", "debug", "--log-format", "json"])
    assert (args.log_level, args.log_format) == ("debug", "json")
    with pytest.raises(SystemExit):
        parser.parse_args(["--log-level", "loud"])
