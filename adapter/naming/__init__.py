"""Pure naming logic of the adapter: rule config → metric names → PromQL, one step per module.

- `promql`: escaping (`go_quote`, `quote_meta`), label-name checks, selector → matchers.
- `names`: `is`/`isNot` filters, `name.matches`/`name.as` with Go `regexp.Expand`.
- `resources`: `GroupResource`, `ResourceInfo`, the `ResourceMapper` protocol, a static mapper.
- `association`: resource ↔ label of one rule (overrides, template).
- `query`: `metricsQuery` template data and `render_query`.
- `results`: Prometheus vector samples → the objects they describe.
- `errors`: the exceptions the server maps to HTTP statuses.

Import the submodules directly (this package re-exports nothing, to keep imports acyclic).
"""
