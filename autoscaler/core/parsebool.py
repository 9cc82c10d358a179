"""Go's strconv.ParseBool, which KEDA reads its boolean annotations with (the pause and direction ones).

Exactly these spellings are booleans; anything else (" true", "yes", "") is not, and KEDA then treats the
annotation as set (apis/keda/v1alpha1/scaledobject_types.go, getBoolAnnotation).
"""

from __future__ import annotations

_TRUE = frozenset(("1", "t", "T", "TRUE", "true", "True"))
_FALSE = frozenset(("0", "f", "F", "FALSE", "false", "False"))


def parse_bool(text: str) -> bool | None:
    """The boolean Go's strconv.ParseBool reads from `text`, or None where it returns an error."""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    return None
