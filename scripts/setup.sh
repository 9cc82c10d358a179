#!/usr/bin/env bash
# Installs what Surge's demo and tests need on a Debian machine, each only when missing:
#   - Debian's `prometheus` package (the real Prometheus the tests and the demo start on free ports);
#   - kubectl: Debian's `kubectl` package from trixie (1.32), unless a kubectl is already on PATH;
#   - with --tests (`make test`): Debian's `chromium` package, without its recommends (headless needs none
#     of them), for the tests and scripts/report_screenshot.py, which load `surge report`'s HTML page (the
#     demo and the image never get it);
#   - the Python venv in .venv, rebuilt only when pyproject.toml changed since the last build;
#   - with --containers (the image tests, `make test-image`): Debian's podman, buildah, runc, slirp4netns and
#     mmdebstrap, which build Surge's image and run its pods on the simulated cluster, and busybox-static
#     (the tiny image of the simulated kubelet's own tests).
# Prints nothing when there is nothing to do.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
apt_install() {
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
}

apt_updated=""
apt_update() {
    [ -n "$apt_updated" ] || $SUDO apt-get update -qq
    apt_updated=1
}

if [ "${1:-}" = "--containers" ]; then
    missing=()
    for tool in podman buildah runc slirp4netns mmdebstrap; do
        command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
    done
    [ -x /bin/busybox ] || missing+=(busybox-static)
    if [ ${#missing[@]} -gt 0 ]; then
        echo "setup: installing Debian's ${missing[*]}"
        apt_update
        apt_install podman buildah runc slirp4netns mmdebstrap uidmap busybox-static
    fi
fi

if ! command -v prometheus >/dev/null 2>&1; then
    echo "setup: installing Debian's prometheus package"
    apt_update
    apt_install prometheus
    # The package starts a system Prometheus on :9090; Surge starts its own on free ports.
    if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
        $SUDO systemctl stop prometheus || true
    fi
fi

if ! command -v kubectl >/dev/null 2>&1; then
    # Bookworm only has kubernetes-client 1.20, whose `describe hpa` and kustomize predate what the tests
    # use. Trixie's kubectl package is a Go binary needing libc6 >= 2.34, so it installs on bookworm too;
    # its file and checksum come from trixie's package index on the mirror this machine's apt uses.
    echo "setup: installing Debian trixie's kubectl package"
    arch=$(dpkg --print-architecture)
    mirror=$(scripts/debian_mirror.sh)
    stanza=$(curl -fsSL "$mirror/dists/trixie/main/binary-$arch/Packages.xz" \
        | xz -d | awk '/^Package: kubectl$/,/^$/')
    file=$(sed -n 's/^Filename: //p' <<<"$stanza")
    sum=$(sed -n 's/^SHA256: //p' <<<"$stanza")
    deb="$(mktemp -d)/kubectl.deb"
    curl -fsSL -o "$deb" "$mirror/$file"
    echo "$sum  $deb" | sha256sum -c --quiet
    apt_install "$deb"
fi

if [ "${1:-}" = "--tests" ] && ! command -v chromium >/dev/null 2>&1; then
    echo "setup: installing Debian's chromium package"
    apt_update
    apt_install --no-install-recommends chromium
fi

# The stamp holds the hash of the pyproject.toml the venv was built from.
stamp=.venv/.surge-pyproject.sha256
wanted=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
    echo "setup: building .venv from pyproject.toml"
    [ -x .venv/bin/python ] || python3 -m venv .venv
    .venv/bin/pip install -q --disable-pip-version-check --upgrade pip
    .venv/bin/pip install -q --disable-pip-version-check -e '.[simulate,test]'
    echo "$wanted" > "$stamp"
fi
