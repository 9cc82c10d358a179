"""The simulated workloads: replica controllers, scheduler and kubelets moving pods through their life,
a load model per workload driving each pod's metrics, the pods' metrics endpoint, metrics.k8s.io, and
the Prometheus file_sd file. `sim.cluster.SimCluster` puts them together with the API server.

Modules: profiles (offered load over time) → model (load split over Ready pods, counters) →
kubelet (pod stages, models) ← controller (store events, reconciles) → replicas (Deployment,
ReplicaSet, StatefulSet); exposition + metrics_http (Prometheus text); metrics_api +
resource_metrics (metrics.k8s.io); file_sd; annotations (`sim.surge.dev/*`); manifests (test objects).
"""
