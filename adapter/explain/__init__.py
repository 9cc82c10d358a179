"""`adapter explain`: why a metric is served or not, as the CLI and `/debug/explain` answer it.

- `paths`: an API path as the HPA asks it → the read it names.
- `assumed`: without Prometheus, the series a rule would need to serve the metric.
- `verdicts`: each discovery rule replayed on its series: does it serve the metric, and if not, why.
- `explanation`: the verdicts, the rule that wins, the PromQL the provider would send.
- `results`: a query's answer → the values the API would return.
- `render`: the JSON and text forms.
- `live`: what an explanation asks Prometheus; `cli` and `adapter.server.explain_routes` use it.
"""
