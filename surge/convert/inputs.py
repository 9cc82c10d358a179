"""Where `surge convert -f` reads: one file, every `*.yaml`, `*.yml` and `*.json` of a directory (sorted by
name, not recursing), or standard input (`-`); each source's text, or why it cannot be read."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class Source:
    name: str  # as messages name it
    text: str | None  # None: unreadable, `problem` says why
    problem: str = ""


def _read(path: Path) -> Source:
    try:
        return Source(str(path), path.read_text(encoding="utf-8"))
    except OSError as err:
        return Source(str(path), None, f"cannot read {path}: {err.strerror}")
    except UnicodeDecodeError:
        return Source(str(path), None, f"{path} is not UTF-8 text")


def is_bulk(filename: str) -> bool:
    """Whether `-f filename` names many objects' sources (a directory, or stdin), each reported alone."""
    return filename == "-" or Path(filename).is_dir()


def sources(filename: str) -> list[Source]:
    """The sources `-f filename` names."""
    if filename == "-":
        try:
            return [Source("(stdin)", sys.stdin.read())]
        except UnicodeDecodeError:
            return [Source("(stdin)", None, "standard input is not UTF-8 text")]
    path = Path(filename)
    if path.is_dir():
        return [_read(p) for p in sorted(path.iterdir()) if p.suffix in SUFFIXES and p.is_file()]
    return [_read(path)]
