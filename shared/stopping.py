"""Which exceptions mean "stop" rather than "crashed", for the code that must survive crashes: the
supervisor's loops, the work-queue workers, and calls into native extensions.

A Rust panic inside a PyO3 extension (promql-parser) reaches Python as `pyo3_runtime.PanicException`,
which derives from BaseException precisely so that `except Exception` lets it through. Code that must
survive whatever a tenant's input makes a library do therefore catches BaseException, except these:

* asyncio.CancelledError: how the supervisor's `stop()`, a timeout or the shutdown ends a task;
  swallowing it leaves a task nothing can stop, and a shutdown that hangs.
* KeyboardInterrupt, SystemExit: Python's own ways of ending the process (`sys.exit()`, SIGINT without
  a handler); asyncio re-raises them out of the event loop. A loop restarted after them would keep a
  process running that was told to end.
* GeneratorExit: thrown into a coroutine that is being closed; one that swallows it makes Python raise
  RuntimeError instead, and its `finally` blocks run twice over.

Everything else, MemoryError and the panics included, is a crash: logged, counted, survived.
"""

from __future__ import annotations

import asyncio

STOPPING: tuple[type[BaseException], ...] = (
    asyncio.CancelledError,
    KeyboardInterrupt,
    SystemExit,
    GeneratorExit,
)
