import pytest

from shared.cli import OneLineErrorParser


def test_flag_error_is_one_line_and_exit_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    parser = OneLineErrorParser(prog="surge-x")
    parser.add_argument("--port", type=int)
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["--port", "eighty"])
    assert exited.value.code == 2
    assert capsys.readouterr().err == "surge-x: error: argument --port: invalid int value: 'eighty'\n"
