"""Accept-header negotiation: we answer JSON only, with k8s.io/apiserver's 406 rules otherwise."""

from __future__ import annotations

from functools import lru_cache

_JSON_RANGES = frozenset({"*/*", "application/*", "application/json"})
# Parameters that ask for a converted representation (Table, APIGroupDiscoveryList...) we don't produce.
_CONVERSION_PARAMS = frozenset({"as", "g", "v"})


# Clients send one Accept header each, over and over: the answer is computed once per distinct header.
@lru_cache(maxsize=256)
def accepts_plain_json(accept: str | None) -> bool:
    """True when a plain JSON body is acceptable: no Accept, or a JSON-compatible range without `as=`."""
    if accept is None or not accept.strip():
        return True
    for media_range in accept.split(","):
        media_type, *params = (part.strip() for part in media_range.split(";"))
        if media_type.lower() not in _JSON_RANGES:
            continue
        names = {p.partition("=")[0].strip().lower() for p in params}
        quality = next((p.partition("=")[2] for p in params if p.lower().startswith("q=")), "1")
        if names & _CONVERSION_PARAMS:
            continue
        try:
            if float(quality) <= 0:
                continue
        except ValueError:
            continue
        return True
    return False


_TABLE_VERSIONS = frozenset({"v1", "v1beta1"})


@lru_cache(maxsize=256)
def table_version(accept: str | None) -> str | None:
    """The `meta.k8s.io` Table version (`v1`, `v1beta1`) when the first usable media range of `accept` asks
    for a Table (kubectl get: `application/json;as=Table;v=v1;g=meta.k8s.io,...,application/json`); None
    when plain JSON comes first."""
    for media_range in (accept or "").split(","):
        media_type, *raw_params = (part.strip() for part in media_range.split(";"))
        if media_type.lower() not in _JSON_RANGES:
            continue
        params = {k.strip().lower(): v.strip() for k, _, v in (p.partition("=") for p in raw_params)}
        try:
            if float(params.get("q", "1")) <= 0:
                continue
        except ValueError:
            continue
        version = params.get("v", "")
        if params.get("as") == "Table" and params.get("g") == "meta.k8s.io" and version in _TABLE_VERSIONS:
            return version
        if not params.keys() & _CONVERSION_PARAMS:
            return None
    return None
