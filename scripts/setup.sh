#!/usr/bin/env bash
# Installs what Surge's demo and tests need on a Debian machine, each only when missing:
#   - Debian's `prometheus` package (the real Prometheus the tests and the demo start on free ports);
#   - kubectl: Debian's `kubernetes-client` package, unless a kubectl is already on PATH;
#   - the Python venv in .venv, rebuilt only when pyproject.toml changed since the last build.
# Prints nothing when there is nothing to do.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
command -v kubectl >/dev/null 2>&1 || missing+=(kubernetes-client)
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing Debian packages: ${missing[*]}"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
    # The package starts a system Prometheus on :9090; Surge starts its own on free ports.
    if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
        $SUDO systemctl stop prometheus || true
    fi
fi

# The stamp holds the hash of the pyproject.toml the venv was built from.
stamp=.venv/.surge-pyproject.sha256
wanted=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
    echo "setup: building .venv from pyproject.toml"
    [ -x .venv/bin/python ] || python3 -m venv .venv
    .venv/bin/pip install -q --disable-pip-version-check --upgrade pip
    .venv/bin/pip install -q --disable-pip-version-check -e '.[test]'
    echo "$wanted" > "$stamp"
fi
