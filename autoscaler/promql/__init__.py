"""PromQL straight from the autoscaler: a Prometheus query client (instant and range queries) and direct
metrics (External metrics named `surge-promql:<name>`), confined by shared/promql/confine.py."""
