"""PromQL both daemons need: confinement of a query to one namespace (the autoscaler's direct PromQL, the
adapter's tenant rules)."""
