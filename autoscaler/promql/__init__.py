"""PromQL straight from the autoscaler: a Prometheus query client (instant and range queries), namespace
confinement of queries, and direct metrics (External metrics named `surge-promql:<name>`)."""
