"""Which bucket a target belongs to, how its Leases are named, and how the buckets are shared out.

Pure logic (no I/O); autoscaler/sharding.py runs the Leases, autoscaler/placement.py says which
namespaces are split.

* A target belongs to the bucket of its namespace, `crc32(namespace) mod N` (stable across processes and
  versions, unlike Python's `hash`), unless its namespace is hot (more targets than
  --leader-elect-hot-namespace-targets): then to the bucket of its key, `crc32("namespace/name") mod N`.
  Bucketing by namespace lets a replica cache only the pods of the namespaces it owns (an autoscaler
  selects pods only in its own namespace), so its memory grows with what it owns, not with the cluster;
  a hot namespace is split so that no bucket, and no replica, carries it whole (docs/deploy.md section 18).
* Bucket Leases are `<name>-bucket-NN-of-MM`; with one bucket the Lease is `<name>` itself (the single
  leader of before, unchanged). Membership Leases are `<name>-member-<identity>`, the identity made a
  valid object name.
* Balance weighs each bucket by its targets (`weights`; an empty bucket weighs 1, so it still goes to
  somebody). With M live members each has a share of the total (`shares`: the total over M, the first
  `total mod M` identities one more), and nobody is planned more than its share plus the heaviest bucket
  (10 equal buckets on 3 replicas go 4, 3 and 3, as the counts did before the buckets were weighed).
* Assignment (`plan`): every replica computes, from the same view of the Leases and targets, who should
  hold each bucket. A holder keeps its lowest-numbered buckets that fit within its `allowance` (its share
  plus half the heaviest bucket: a target created or deleted moves no bucket), unless that slack leaves
  some member more than the slack below its share: then holders keep up to their share only (4, 2 and 4
  buckets of about 300 targets would otherwise be a plan that holds: 37, 24 and 39 %). The rest (free,
  expired, held by a member no longer live, or beyond what its holder keeps) go, in bucket order, to the first
  member in identity order whose share they still fit into (first fit); what fits nobody's share goes,
  in bucket order, to the least loaded member. A replica takes only the free buckets planned for it, so
  it knows in advance which ones it will get (and lists their pods before they are free), and two
  replicas never race for one bucket while their views agree.
* Carrying the plan out: a bucket given up was not kept, and one taken by the member the first fit gave
  it to is kept at the same load, so neither step changes the plan; with equal weights there is no other
  kind (the plan is then the count-based one of before, stable step by step). A bucket that fit nobody's
  share, taken before the ones the first fit gave its new holder, can make one of those fit no more and go
  elsewhere: the plan then moves on, and carrying it out still ends (random holders, members and weights,
  steps in random orders: every run reached a plan that holds, the longest in 23 steps, a bucket moving
  twice in 1.7 % of them; tests/autoscaler/test_sharding.py checks that it ends).
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
    """The bucket of a namespace's targets (a namespace that is not hot)."""
    return zlib.crc32(namespace.encode()) % buckets


def bucket_of_key(namespace: str, name: str, buckets: int) -> int:
    """The bucket of one target of a hot namespace."""
    return zlib.crc32(f"{namespace}/{name}".encode()) % buckets


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


def weights(targets: Sequence[int]) -> list[int]:
    """The weight of each bucket in the balance: its targets, at least 1."""
    return [max(1, count) for count in targets]


def allowance(weight: Sequence[int], members: Iterable[str], member: str) -> int:
    """What `member` keeps of what it holds: its share plus half the heaviest bucket (see `plan`)."""
    return shares(weight, members)[member] + max(weight, default=0) // 2


def plan(holders: Sequence[str], members: Iterable[str], weight: Sequence[int] | None = None) -> list[str]:
    """Who should hold each bucket: `holders[i]` is bucket i's holder ("" : free or expired), `members`
    the live identities, `weight[i]` bucket i's weight (`weights`; all 1 when not given). See the module
    docstring. Deterministic, so replicas with the same view agree."""
    ranked = sorted(set(members))
    if not ranked:
        return ["" for _ in holders]
    weight = list(weight) if weight is not None else [1] * len(holders)
    slack = max(weight, default=0) // 2
    owner, short = _laid_out(holders, ranked, weight, slack)
    # The slack must not starve anyone: a member left more than the slack below its share (holders kept
    # what it could have had) is planned again with holders keeping their share only.
    return _laid_out(holders, ranked, weight, 0)[0] if short > slack else owner


def _laid_out(
    holders: Sequence[str], ranked: list[str], weight: list[int], slack: int
) -> tuple[list[str], int]:
    """The plan with holders keeping up to their share plus `slack`, and how far the member furthest
    below its share is below it."""
    count = len(holders)
    share = shares(weight, ranked)
    load = dict.fromkeys(ranked, 0)
    owner = ["" for _ in holders]
    for member in ranked:
        for bucket in range(count):
            if holders[bucket] == member and load[member] + weight[bucket] <= share[member] + slack:
                owner[bucket] = member
                load[member] += weight[bucket]
    rest = [b for b in range(count) if not owner[b]]
    for member in ranked:
        for bucket in rest:
            if not owner[bucket] and load[member] + weight[bucket] <= share[member]:
                owner[bucket] = member
                load[member] += weight[bucket]
    for bucket in rest:
        if not owner[bucket]:
            member = min(ranked, key=lambda m: (load[m] - share[m], m))
            owner[bucket] = member
            load[member] += weight[bucket]
    return owner, max(share[m] - load[m] for m in ranked)


def shares(weight: Sequence[int], members: Iterable[str]) -> dict[str, int]:
    """Each member's share of the total weight, in whole units: the first `total mod M` members (by
    identity) one more (so equal weights give the shares of a count: 4, 3 and 3 of 10)."""
    ranked = sorted(set(members))
    base, extra = divmod(sum(weight), len(ranked))
    return {member: base + (1 if rank < extra else 0) for rank, member in enumerate(ranked)}
