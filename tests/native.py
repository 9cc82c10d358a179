"""A real native failure for tests of the code that must survive one: a Rust panic of promql-parser,
which PyO3 raises as `pyo3_runtime.PanicException`, a BaseException (reading an `@` time before 1970)."""

from __future__ import annotations

import promql_parser as pp


def native_panic() -> BaseException:
    """The panic the library raises (its type is created by PyO3 at run time: no import names it)."""
    selector = pp.parse("x @ -1")
    assert isinstance(selector, pp.VectorSelector) and selector.at is not None
    try:
        selector.at.at  # noqa: B018 - the getter is what panics
    except BaseException as err:  # the point: it is no Exception
        assert not isinstance(err, Exception), f"promql-parser raised {err!r}, an Exception"
        return err
    raise AssertionError("promql-parser no longer panics on an @ before 1970")
