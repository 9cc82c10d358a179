#!/usr/bin/env bash
# Builds Surge's image from the Dockerfile: `scripts/build_image.sh [TAG]` (default surge:<version>).
#
# With a running Docker engine, `docker build`. Otherwise with buildah (podman's storage, so that podman
# and the simulated kubelet run it at once). Where the Dockerfile's base cannot be pulled (a machine that
# reaches only package registries), a stand-in with the same layout is made from Debian packages and
# tagged with the base's name: Debian's python3 in a minbase bookworm, a venv at /usr/local (python, pip
# and setuptools where the official image has them). It is made again only when its inputs change (the
# recipe below, this machine's CA bundle: pip inside the build needs it to reach the package index).
# The stand-in is a build fixture for this machine; the Dockerfile is what a user builds with docker.
#
# Podman and buildah run with runc, cgroupfs and explicit ulimits (scripts/podman_flags.sh says why).
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -n1)
tag=${1:-surge:$version}
base=$(sed -n 's/^FROM \([^ ]*\) AS build$/\1/p' Dockerfile)
[ -n "$base" ] || { echo "build_image: no 'FROM <base> AS build' line in Dockerfile" >&2; exit 2; }

if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
    exec docker build -t "$tag" .
fi
command -v buildah >/dev/null 2>&1 || {
    echo "build_image: neither a running Docker engine nor buildah; install docker, or podman and buildah" >&2
    exit 2
}
# shellcheck source=scripts/podman_flags.sh
. scripts/podman_flags.sh

qualified="docker.io/library/${base}"
[[ "$base" == */* ]] && qualified="$base"
ca_bundle=/etc/ssl/certs/ca-certificates.crt
recipe=$(sed -n '/^make_standin()/,/^}/p' "$0")
inputs=$( { echo "$qualified"; echo "$recipe"; cat "$ca_bundle" 2>/dev/null; } | sha256sum | cut -c1-16)

make_standin() {
    local work suite
    work=$(mktemp -d)
    trap 'rm -rf "$work"' RETURN
    suite=bookworm
    echo "build_image: $qualified cannot be pulled; making a stand-in from Debian's $suite packages"
    mmdebstrap --quiet --variant=minbase --include=python3,python3-venv,ca-certificates \
        "$suite" "$work/rootfs.tar" "$(scripts/debian_mirror.sh)"
    podman "${PODMAN_FLAGS[@]}" import --quiet "$work/rootfs.tar" "localhost/surge-standin-rootfs:$inputs" >/dev/null
    cp "$ca_bundle" "$work/build-ca.crt"
    cat >"$work/Containerfile" <<EOF
FROM localhost/surge-standin-rootfs:$inputs
RUN python3 -m venv /usr/local
COPY build-ca.crt /etc/ssl/certs/surge-build-ca.crt
ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \\
    PIP_CERT=/etc/ssl/certs/surge-build-ca.crt
LABEL dev.surge.standin=$inputs
CMD ["python3"]
EOF
    buildah "${BUILDAH_FLAGS[@]}" bud --quiet "${BUILD_FLAGS[@]}" -t "$qualified" -f "$work/Containerfile" "$work" >/dev/null
    podman "${PODMAN_FLAGS[@]}" rmi "localhost/surge-standin-rootfs:$inputs" >/dev/null
}

have=$(podman "${PODMAN_FLAGS[@]}" image inspect --format '{{index .Labels "dev.surge.standin"}}' "$qualified" 2>/dev/null || true)
if [ -z "$have" ] && podman "${PODMAN_FLAGS[@]}" image exists "$qualified"; then
    :  # the real base (pulled or loaded earlier): use it
elif [ "$have" != "$inputs" ] && ! timeout 60 podman "${PODMAN_FLAGS[@]}" pull --quiet "$qualified" >/dev/null 2>&1; then
    make_standin
fi

buildah "${BUILDAH_FLAGS[@]}" bud --quiet --layers "${BUILD_FLAGS[@]}" -t "$tag" . >/dev/null
size=$(podman "${PODMAN_FLAGS[@]}" image inspect --format '{{.Size}}' "$tag")
echo "build_image: built $tag ($((size / 1000000)) MB)"
