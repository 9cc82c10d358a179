"""Pure logic of `metrics.k8s.io` served from the config's `resourceRules`, as prometheus-adapter does it.

- `queries`: a cpu or memory rule → the PromQL for the pods of one namespace, or for nodes.
- `usage`: Prometheus samples → each pod's per-container usage and each node's usage.
- `fields`: the `fieldSelector` of list requests (`metadata.name`, `metadata.namespace`).
- `documents`: PodMetrics / NodeMetrics (and their lists) as JSON, the group's discovery documents.
- `tables`: the `meta.k8s.io` Table form kubectl asks for.

No I/O here: the server (adapter/server/resource_*.py) lists pods and nodes and queries Prometheus.
"""
