"""Tenant rules: teams own their metrics with MetricRule and MetricBackend objects in their namespaces,
confined to those namespaces, and the platform team with ClusterMetricRule and ClusterMetricBackend."""
