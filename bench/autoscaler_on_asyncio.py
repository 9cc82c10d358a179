"""The autoscaler daemon on asyncio's own event loop instead of uvloop: the other side of
bench_autoscaler_transport.py's `--against asyncio` (not a benchmark itself).

    .venv/bin/python bench/autoscaler_on_asyncio.py <the autoscaler's flags>
"""

from __future__ import annotations

import asyncio

import uvloop

from autoscaler.__main__ import main

if __name__ == "__main__":
    uvloop.run = asyncio.run  # type: ignore[assignment]  # (what main() runs the daemon with)
    main()
