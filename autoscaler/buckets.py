"""Which bucket a target belongs to, how its Leases are named, and how many buckets a replica may hold.

Pure logic (no I/O); autoscaler/sharding.py runs the Leases.

* A target belongs to the bucket of its namespace: `crc32(namespace) mod N` (stable across processes and
  versions, unlike Python's `hash`). Bucketing by namespace, not by `namespace/name`, lets a replica
  cache only the pods of the namespaces it owns (an autoscaler selects pods only in its own namespace),
  so its memory grows with what it owns, not with the cluster (docs/deploy.md section 18).
* Bucket Leases are `<name>-bucket-NN-of-MM`; with one bucket the Lease is `<name>` itself (the single
  leader of before, unchanged). Membership Leases are `<name>-member-<identity>`, the identity made a
  valid object name.
* Balance: the live members sorted by identity; with N buckets and M members the first `N mod M` may
  hold `ceil(N / M)` buckets and the others `floor(N / M)`: never more than ceil(N / M), and three
  replicas end up with 4, 3 and 3 of 10 instead of 4, 4 and 2.
* Assignment (`plan`): every replica computes, from the same view of the Leases, who should hold each
  bucket: a holder keeps its lowest-numbered buckets up to its quota, and the rest (free, expired, held
  by a member no longer live, or above a holder's quota) go in bucket order to the members below their
  quota, one run of consecutive buckets each. A replica takes only the free buckets planned for it, so
  it knows in advance which ones it will get (and lists their pods before they are free), two replicas
  never race for one bucket while their views agree, and the plan does not change as it is carried out.
"""

from __future__ import annotations

import hashlib
import re
import zlib
from collections.abc import Iterable, Sequence

# Object names are DNS subdomains: at most 253 characters of [a-z0-9.-], alphanumeric at both ends.
_INVALID = re.compile(r"[^a-z0-9.-]+")
_MAX_NAME = 253


def bucket_of(namespace: str, buckets: int) -> int:
    return zlib.crc32(namespace.encode()) % buckets


def bucket_lease_name(base: str, bucket: int, buckets: int) -> str:
    if buckets == 1:
        return base
    return f"{base}-bucket-{bucket:02d}-of-{buckets:02d}"


def member_lease_name(base: str, identity: str) -> str:
    """`<base>-member-<identity>`, the identity lowercased and its other characters made '-'; a name
    that would be too long ends in a hash of the identity instead (still one Lease per identity)."""
    cleaned = _INVALID.sub("-", identity.lower()).strip("-.") or "x"
    name = f"{base}-member-{cleaned}"
    if len(name) <= _MAX_NAME and cleaned == identity:
        return name
    digest = hashlib.sha256(identity.encode()).hexdigest()[:10]
    return f"{base}-member-{cleaned}"[: _MAX_NAME - 11].rstrip("-.") + "-" + digest


def quota(identity: str, members: Iterable[str], buckets: int) -> int:
    """How many buckets `identity` may hold while `members` (itself included or not) are live."""
    ranked = sorted(set(members) | {identity})
    base, extra = divmod(buckets, len(ranked))
    return base + (1 if ranked.index(identity) < extra else 0)


def to_release(held: Iterable[int], allowed: int) -> list[int]:
    """The held buckets to give up to come down to `allowed`: the highest-numbered ones."""
    ordered = sorted(held)
    return ordered[allowed:] if len(ordered) > allowed else []


def plan(holders: Sequence[str], members: Iterable[str]) -> list[str]:
    """Who should hold each bucket: `holders[i]` is bucket i's holder ("" : free or expired), `members`
    the live identities (see the module docstring). Deterministic, so replicas that see the same Leases
    agree; and stable while it is carried out: a member taking a bucket planned for it (or giving up
    one above its quota) leaves every other bucket's owner as it was."""
    ranked = sorted(set(members))
    if not ranked:
        return ["" for _ in holders]
    count = len(holders)
    need = {member: quota(member, ranked, count) for member in ranked}
    owner = ["" for _ in holders]
    for bucket, holder in enumerate(holders):
        if need.get(holder, 0) > 0:
            owner[bucket] = holder
            need[holder] -= 1
    # The rest, in bucket order, as consecutive runs: the first member (by identity) its need, then the
    # next. A member taking one of its run's buckets shortens its own run by that bucket only.
    rest = iter(bucket for bucket in range(count) if not owner[bucket])
    for member in ranked:
        for _ in range(need[member]):
            owner[next(rest)] = member
    return owner
