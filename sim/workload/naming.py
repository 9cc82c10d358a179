"""Object names the way the real controllers make them: `<deploy>-<template hash>-<5 chars>`."""

from __future__ import annotations

import json
import secrets
from typing import Any

# Kubernetes' "safe" alphabet: no vowels (no accidental words) and no look-alike characters.
SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def _fnv1a_32(data: bytes) -> int:
    value = 0x811C9DC5
    for byte in data:
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


def pod_template_hash(template: dict[str, Any], collision_count: int = 0) -> str:
    """A stable hash of a pod template, spelled in the safe alphabet like `pod-template-hash` labels."""
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    if collision_count:
        data += collision_count.to_bytes(4, "little")
    digits = str(_fnv1a_32(data))
    # Each decimal digit's character code picks a letter, as the real controller spells the number.
    return "".join(SAFE_ALPHABET[ord(d) % len(SAFE_ALPHABET)] for d in digits)


def random_suffix(length: int = 5) -> str:
    return "".join(secrets.choice(SAFE_ALPHABET) for _ in range(length))
