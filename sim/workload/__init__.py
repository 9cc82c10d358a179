"""The simulated workloads: replica controllers, scheduler and kubelets moving pods through their life,
a load model per workload driving each pod's metrics, the scrape targets (pods, nodes' kubelets and
node-exporters), metrics.k8s.io, and the Prometheus file_sd file. `sim.cluster.SimCluster` puts them
together with the API server.

Modules: profiles (offered load over time) → model (load split over Ready pods, counters) →
kubelet (nodes, pod stages, models; summary: what it reports) ← controller (store events, reconciles)
→ replicas (Deployment, ReplicaSet, StatefulSet); exposition + node_exposition + metrics_http
(Prometheus text); metrics_api + resource_metrics (metrics.k8s.io); file_sd; annotations
(`sim.surge.dev/*`); manifests (test objects).
"""
