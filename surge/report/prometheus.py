"""Read each shadowed target's series from Prometheus for the report: range queries on one grid.

prometheus-api-client's synchronous client, as `surge simulate` reads its series: the report is an offline
command, and shared/prometheus.py is the daemons' asyncio transport for instant queries. Every query is
aggregated by its identifying labels (`max by (namespace, name, ...)`), so the scrape's own labels (job,
instance; a restarted daemon's new pod) do not split a target's series.

The step is the series' resolution: the median gap between the newest raw samples of the shadow series
(its scrape interval), unless --step gives one. Prometheus answers at most 11,000 points per series and
query, so a long window is asked for in chunks. The pods' observed start-up is one instant query at the
window's end per histogram part (`increase` over the window), summed over the scrape's labels: a
restarted daemon's counters start again in a new series.

The targets are read BATCH_TARGETS at a time, so that the report holds one batch's series, not every
target's (1,000 targets x 24 h at 15 s are 43 million values: 2.8 GiB as Python lists, bench/bench_report.py).
An instant query first lists the targets with a shadow sample in the window or the hour before it (more
than Prometheus' 5-minute lookback reaches back from the window's first step): a superset of those the
range queries find, as the range query of each batch decides. A batch's selector matches its namespaces
and its names (`namespace=~"a|b",name=~"x|y"`, each value escaped as a regex and quoted), which can
select a target of another batch (a name of namespace a in namespace b): the series of a target not in
the batch are dropped as they are read.

About half the report's time is Prometheus answering (its CPU: 5.4 s of a 10 s report at 100 targets), so
a thread asks for the next batch's range queries while this batch's are decoded, placed and analysed.
What it holds ahead is Prometheus' undecoded answer (about 3 MiB a query of 25 targets x 24 h; decoded,
several times that), so the range queries go through the client's `requests` session but not its
`custom_query_range`, which returns the answer decoded. They are decoded with orjson (a dependency of the
adapter already): 0.135 s against json's 0.152 s for a 6.1 MiB answer.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict, deque
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from itertools import islice
from typing import Any, TypeVar

import orjson
import requests
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect
from urllib3.util.retry import Retry

from adapter.naming.promql import quote_meta
from shared.promql.confine import quote
from surge.report.analysis import Trace, decided
from surge.report.startup import Key, Observed

CHUNK_POINTS = 10_000
BATCH_TARGETS = 25
DISCOVERY_MARGIN_SECONDS = 3600
T = TypeVar("T")
TIMEOUT_SECONDS = 60
DEFAULT_STEP = 15
SHADOW = "surge_shadow_desired_replicas"
INCUMBENT_CURRENT = "surge_incumbent_current_replicas"
INCUMBENT_DESIRED = "surge_incumbent_desired_replicas"
INCUMBENT_READ = "surge_incumbent_target_metric"
STARTUP = "surge_target_pod_startup_seconds"
PREFIX = "surge_autoscaler_target_"
TARGET_LABELS = ("namespace", "name")
METRIC_LABELS = ("namespace", "name", "metric_name", "metric_target_type")


class Unreachable(Exception):
    """Prometheus did not answer (refused, timed out): the message says where."""


class Refused(Exception):
    """Prometheus answered with an error: the message has its text."""


@dataclass(frozen=True, slots=True)
class Window:
    start: int
    end: int
    step: int

    @property
    def times(self) -> list[float]:
        return [float(t) for t in range(self.start, self.end + 1, self.step)]


def _selector(metric: str, namespace: str | None) -> str:
    return f"{metric}{{namespace={quote(namespace)}}}" if namespace is not None else metric


def _batch_selector(metric: str, batch: Sequence[Key]) -> str:
    """`metric` of the batch's namespaces and names (a superset of the batch: see the module docstring)."""
    namespaces = quote("|".join(quote_meta(ns) for ns in sorted({key[0] for key in batch})))
    names = quote("|".join(quote_meta(name) for name in sorted({key[1] for key in batch})))
    return f"{metric}{{namespace=~{namespaces},name=~{names}}}"


class Reader:
    """One Prometheus' range queries on `window`, each series keyed by its labels' values."""

    def __init__(self, url: str, window: Window | None = None) -> None:
        self.url = url
        self.window = window
        # A refused connection is reported at once (the client's default retries it for 6 s); a busy
        # Prometheus' 429 or a proxy's 502-504 is retried.
        retry = Retry(total=3, connect=0, backoff_factor=0.5, status_forcelist=(429, 502, 503, 504))
        self._session = requests.Session()
        self._client = PrometheusConnect(url, timeout=TIMEOUT_SECONDS, retry=retry, session=self._session)

    def _range_body(self, query: str, start: int, end: int, step: int) -> bytes:
        """Prometheus' answer to a range query, undecoded (see the module docstring)."""
        params = {"query": query, "start": str(start), "end": str(end), "step": f"{step}s"}
        try:
            response = self._session.get(
                f"{self.url}/api/v1/query_range", params=params, timeout=TIMEOUT_SECONDS
            )
        except requests.RequestException as err:
            raise Unreachable(f"cannot query Prometheus at {self.url}: {type(err).__name__}") from None
        if response.status_code != 200:
            answer = f"HTTP {response.status_code} ({response.content!r})"
            raise Refused(f"Prometheus at {self.url} refused {query!r}: {answer}")
        return response.content

    def _instant(self, query: str, at: int) -> list[dict[str, Any]]:
        try:
            return list(self._client.custom_query(query, params={"time": str(at)}))
        except PrometheusApiClientException as err:
            raise Refused(f"Prometheus at {self.url} refused {query!r}: {err}") from None
        except requests.RequestException as err:
            raise Unreachable(f"cannot query Prometheus at {self.url}: {type(err).__name__}") from None

    def resolution(self, namespace: str | None, until: int) -> int:
        """The shadow series' scrape interval in whole seconds (DEFAULT_STEP when it has no samples)."""
        result = self._instant(f"{_selector(SHADOW, namespace)}[10m]", until)
        gaps = [
            float(b[0]) - float(a[0])
            for series in result
            for a, b in zip(series["values"], series["values"][1:], strict=False)
        ]
        return max(1, round(statistics.median(gaps))) if gaps else DEFAULT_STEP

    def targets(self, namespace: str | None) -> list[Key]:
        """The (namespace, name) of every target with a shadow sample from DISCOVERY_MARGIN_SECONDS before
        the window to its end, sorted: a superset of the targets the window's range queries find."""
        assert self.window is not None
        w = self.window
        span = w.end - w.start + DISCOVERY_MARGIN_SECONDS
        query = f"{_by(TARGET_LABELS, f'last_over_time({_selector(SHADOW, namespace)}[{span}s])')}"
        found = self._instant(query, w.end)
        return sorted(
            {(str(f["metric"].get("namespace", "")), str(f["metric"].get("name", ""))) for f in found}
        )

    def chunks(self) -> list[tuple[int, int]]:
        """The window's first and last step of each range query of a series (CHUNK_POINTS at most)."""
        assert self.window is not None
        w = self.window
        return [
            (first, min(first + (CHUNK_POINTS - 1) * w.step, w.end))
            for first in range(w.start, w.end + 1, CHUNK_POINTS * w.step)
        ]

    def range_body(self, query: str, chunk: tuple[int, int]) -> bytes:
        """Prometheus' answer to `query` over one of `chunks()`, undecoded."""
        assert self.window is not None
        return self._range_body(query, *chunk, self.window.step)

    def series(
        self, bodies: Iterable[bytes], labels: tuple[str, ...], targets: Collection[Key]
    ) -> dict[tuple[str, ...], list[float | None]]:
        """A query's answers (`range_body`'s, one per chunk) on the window's grid: per series of one of
        `targets` (its `labels`' values, the first two its target's), a value or None per step."""
        assert self.window is not None
        times = self.window.times
        index = {t: i for i, t in enumerate(times)}
        out: dict[tuple[str, ...], list[float | None]] = defaultdict(lambda: [None] * len(times))
        for body in bodies:
            for found in orjson.loads(body)["data"]["result"]:
                key = tuple(str(found["metric"].get(label, "")) for label in labels)
                if key[:2] not in targets:
                    continue
                _place(out[key], found["values"], index, times)
        return dict(out)

    def at_end(self, query: str, labels: tuple[str, ...]) -> dict[tuple[str, ...], float]:
        """`query` at the window's end: per series (its `labels`' values), its value."""
        assert self.window is not None
        out: dict[tuple[str, ...], float] = {}
        for found in self._instant(query, self.window.end):
            value = float(found["value"][1])
            if math.isfinite(value):
                out[tuple(str(found["metric"].get(label, "")) for label in labels)] = value
        return out


def _place(
    values: list[float | None], points: list[tuple[float, str]], index: dict[float, int], times: list[float]
) -> None:
    """Each of a series' `points` (time, value as text) at its step in `values` (`index`: a grid time's
    step), unless off the grid or not finite. Most series have a point at every step of the query:
    then they are placed as one slice, without looking up each time (4 to 5 times faster)."""
    first = index.get(float(points[0][0])) if points else None
    last = -1 if first is None else first + len(points) - 1
    if first is not None and last < len(times) and float(points[-1][0]) == times[last]:
        converted = [float(text) for _, text in points]
        if all(map(math.isfinite, converted)):
            values[first : last + 1] = converted
            return
    for stamp, text in points:
        value = float(text)
        i = index.get(float(stamp))
        if i is not None and math.isfinite(value):
            values[i] = value


def _by(labels: tuple[str, ...], selector: str) -> str:
    return f"max by ({', '.join(labels)}) ({selector})"


FORECAST_LABELS = ("namespace", "name", "metric_name")
# Each series read per target: its metric and the labels it is aggregated by.
QUERIES = (
    (SHADOW, TARGET_LABELS),
    (INCUMBENT_CURRENT, TARGET_LABELS),
    (INCUMBENT_DESIRED, TARGET_LABELS),
    (INCUMBENT_READ, METRIC_LABELS),
    (PREFIX + "spec_max_replicas", TARGET_LABELS),
    (PREFIX + "status_target_metric", METRIC_LABELS),
    (PREFIX + "spec_target_metric", METRIC_LABELS),
    (PREFIX + "forecast_metric", FORECAST_LABELS),
)


def _ahead(calls: Iterable[Callable[[], T]], depth: int) -> Iterator[T]:
    """Each call's result in order, up to `depth` calls ahead made in a thread meanwhile (see the module
    docstring)."""
    thread = ThreadPoolExecutor(max_workers=1)
    pending: deque[Future[T]] = deque()
    try:
        for call in calls:
            pending.append(thread.submit(call))
            if len(pending) > depth:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        thread.shutdown(cancel_futures=True)  # on an error, the calls not yet made are not


def read_traces(reader: Reader, targets: Sequence[Key]) -> Iterator[Trace]:
    """A trace per one of `targets` (sorted) with a shadow series in the window, in their order, read
    BATCH_TARGETS at a time. Its metric is the first (by name) with both a spec target and a status
    value; a target without one is left out."""
    batches = [targets[first : first + BATCH_TARGETS] for first in range(0, len(targets), BATCH_TARGETS)]
    chunks = reader.chunks()
    bodies = _ahead(
        (
            partial(reader.range_body, _by(labels, _batch_selector(metric, batch)), chunk)
            for batch in batches
            for metric, labels in QUERIES
            for chunk in chunks
        ),
        depth=len(QUERIES) * len(chunks),
    )
    for batch in batches:
        keys = frozenset(batch)
        read = {
            metric: reader.series(islice(bodies, len(chunks)), labels, keys) for metric, labels in QUERIES
        }
        yield from _traces(reader, read)


def _traces(reader: Reader, read: dict[str, dict[tuple[str, ...], list[float | None]]]) -> Iterator[Trace]:
    """The traces of one batch, from each of QUERIES' series (by metric)."""
    assert reader.window is not None
    surge, current, desired, incumbent_reads, maxima, status, spec, forecasts = (
        read[metric] for metric, _ in QUERIES
    )
    times = reader.window.times
    none: list[float | None] = [None] * len(times)
    for key in sorted(surge):
        metrics = sorted(m for m in status if m[:2] == key and m in spec)
        if not metrics:
            continue
        metric = metrics[0]
        yield Trace(
            namespace=key[0],
            name=key[1],
            metric_name=metric[2],
            times=times,
            step=float(reader.window.step),
            load=status[metric],
            target=spec[metric],
            target_type=metric[3],
            incumbent=decided(desired.get(key, none), current.get(key, none)),
            running=current.get(key, none),
            surge=surge[key],
            max_replicas=maxima.get(key, none),
            forecast=forecasts.get(metric[:3]),
            incumbent_load=incumbent_reads.get(metric),
        )


def read_startups(reader: Reader, namespace: str | None) -> dict[tuple[str, ...], Observed]:
    """Per target, its pods' start-ups observed over the window (those with a histogram series)."""
    assert reader.window is not None
    span = reader.window.end - reader.window.start

    def increase(part: str) -> dict[tuple[str, ...], float]:
        selector = _selector(f"{STARTUP}_{part}", namespace)
        query = f"sum by ({', '.join(TARGET_LABELS)}) (increase({selector}[{span}s]))"
        return reader.at_end(query, TARGET_LABELS)

    totals, counts = increase("sum"), increase("count")
    return {key: Observed(totals.get(key, 0.0), count) for key, count in counts.items()}
