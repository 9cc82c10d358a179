# Sourced by the scripts that run podman or buildah. Flags that work in every sandbox seen so far:
# runc rather than crun and cgroupfs rather than systemd (crun and systemd's cgroup manager are refused
# where there is no systemd and no cgroup delegation), and explicit ulimits (the defaults, taken from the
# caller's, exceed what such a sandbox lets a container set). sim/workload/containers uses the same.
# shellcheck shell=bash
PODMAN_FLAGS=(--runtime runc --cgroup-manager cgroupfs)
BUILDAH_FLAGS=(--cgroup-manager cgroupfs)
BUILD_FLAGS=(--runtime runc --ulimit nofile=1024:1024 --ulimit nproc=1024:1024)
export PODMAN_FLAGS BUILDAH_FLAGS BUILD_FLAGS
