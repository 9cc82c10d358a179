"""Command-line conventions shared by the daemons and tools."""

from __future__ import annotations

import argparse
from typing import NoReturn


class OneLineErrorParser(argparse.ArgumentParser):
    """Flag errors as one line (`prog: error: ...`) and exit status 2, without the long usage text."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")
