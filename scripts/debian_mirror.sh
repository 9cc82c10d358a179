#!/usr/bin/env bash
# Prints the Debian mirror this machine's apt uses (its main archive, not the security one), so that the
# scripts fetch Debian packages from wherever the machine is allowed to, not from a mirror named here.
# Reads deb822 sources (*.sources) and one-line sources.list entries; falls back to deb.debian.org.
set -euo pipefail

mirror=$(
    {
        cat /etc/apt/sources.list.d/*.sources 2>/dev/null | sed -n 's/^URIs:[[:space:]]*//p' | tr ' ' '\n'
        cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
            | sed -n 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]\+\).*/\2/p'
    } | grep -v -- '-security' | grep -E '^https?://' | head -n1 || true
)
echo "${mirror:-http://deb.debian.org/debian}"
