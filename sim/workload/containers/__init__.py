"""Real containers for the simulated kubelet (`SimCluster(container_runtime="podman")`): a pod whose
image is in local container storage runs under podman; one whose image is not stays in ImagePullBackOff.

Modules: images (which local image a pod's `image:` names) · env (environment, `$(VAR)`, command line)
· volumes (ConfigMap, Secret, emptyDir, downward API, projected and service-account volumes on disk) ·
podman_args (container spec → `podman run` arguments) · probes (thresholds, timing, CrashLoopBackOff) ·
checks (HTTP, TCP, exec checks against published ports) · state (what is known of each container) ·
status (the pod status written from it) · runtime (podman's CLI) · runner (each pod's containers: start,
probe, restart, stop, logs, clean-up). All but runtime, runner and checks are pure.
"""
