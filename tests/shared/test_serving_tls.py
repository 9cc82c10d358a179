"""shared.serving's self-signed pair: without --cert-dir it lives only in the serving context (nothing is
left in the temporary directory, and there is nothing to reload); with one it is kept there, as before."""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

import pytest

from shared.serving.options import add_serving_flags, serving_options_from_namespace, serving_tls


def serving(*flags: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_serving_flags(parser, secure_port=0, cert_dir="", max_connections=10)
    return parser.parse_args(["--bind-address=127.0.0.1", *flags])


def test_without_cert_dir_the_pair_is_kept_in_memory_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    tls = serving_tls(serving_options_from_namespace(serving()))
    assert tls is not None and not tls.reloadable
    assert list(tmp_path.iterdir()) == []
    asyncio.run(asyncio.wait_for(tls.watch(0.001), 5))  # returns at once: nothing on disk to watch


def test_with_cert_dir_the_pair_is_kept_there(tmp_path: Path) -> None:
    cert_dir = tmp_path / "certs"
    tls = serving_tls(serving_options_from_namespace(serving(f"--cert-dir={cert_dir}")))
    assert tls is not None and tls.reloadable
    assert sorted(path.name for path in cert_dir.iterdir()) == ["apiserver.crt", "apiserver.key"]
