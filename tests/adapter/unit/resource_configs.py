"""resourceRules configs as prometheus-adapter users deploy them (test data, copied by hand)."""

# prometheus-adapter v0.12.0's deploy/manifests/config-map.yaml (kube-prometheus' too): the `config.yaml`
# it mounts, key quoting and block scalars (trailing newlines) included.
PA_DEPLOY_CONFIG = """\
"resourceRules":
  "cpu":
    "containerLabel": "container"
    "containerQuery": |
      sum by (<<.GroupBy>>) (
        irate (
            container_cpu_usage_seconds_total{<<.LabelMatchers>>,container!="",pod!=""}[4m]
        )
      )
    "nodeQuery": |
      sum by (<<.GroupBy>>) (
        irate(
            node_cpu_usage_seconds_total{<<.LabelMatchers>>}[4m]
        )
      )
    "resources":
      "overrides":
        "namespace":
          "resource": "namespace"
        "node":
          "resource": "node"
        "pod":
          "resource": "pod"
  "memory":
    "containerLabel": "container"
    "containerQuery": |
      sum by (<<.GroupBy>>) (
        container_memory_working_set_bytes{<<.LabelMatchers>>,container!="",pod!=""}
      )
    "nodeQuery": |
      sum by (<<.GroupBy>>) (
        node_memory_working_set_bytes{<<.LabelMatchers>>}
      )
    "resources":
      "overrides":
        "node":
          "resource": "node"
        "namespace":
          "resource": "namespace"
        "pod":
          "resource": "pod"
  "window": "5m"
"""
