"""absentValue for a metric that was never seen: the series a rule would have found, made up.

Discovery names a rule's metrics from the series it finds; a queue that has never existed has no series,
so its metric would never be served and its absentValue never read. A rule with `absentValue` whose
series query names one series exactly (`orders_queue{...}` or `{__name__="orders_queue",...}`) is
therefore given that series when discovery finds none of it: named by the rule's own namer, with the
labels of its resource overrides (so a custom metric is served for those resources), and its queries
then return no series, which absentValue answers.
"""

from __future__ import annotations

from adapter.config import DiscoveryRule
from adapter.seriesshapes import SeriesShapes
from shared.promql.series_selector import series_name


def absent_series(rule: DiscoveryRule, found: SeriesShapes) -> SeriesShapes | None:
    """The made-up series of `rule` (see the module docstring) when `found` lacks it; else None."""
    name = series_name(rule.series_query)
    if name is None or any(found_name == name for found_name, _ in found.shapes):
        return None
    labels = ("__name__", *sorted(rule.association.overrides))
    return SeriesShapes(found.count, (*found.shapes, (name, labels)))
