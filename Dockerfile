# syntax=docker/dockerfile:1
# Surge: one image, two daemons (surge-adapter, surge-autoscaler).
# Build: docker build -t surge:0.1.0 .

# ---- build: install the package and its pinned-by-pyproject dependencies into a venv ----
FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/venv
# Only what the package needs (no tests, no venv, no VCS metadata) goes into the build context used.
COPY pyproject.toml README.md ./
COPY adapter ./adapter
COPY autoscaler ./autoscaler
COPY shared ./shared
COPY sim ./sim
COPY demo ./demo
COPY surge ./surge
# The same install CI runs (scripts/setup.sh), minus the editable flag and the extras (the test tools, and
# `simulate`: matplotlib and prometheus-api-client serve only `surge simulate` and the demo's charts).
# pip and setuptools are not needed at run time: they leave the venv here, before it is copied.
RUN /opt/venv/bin/pip install . \
    && /opt/venv/bin/python -m pip uninstall -q -y pip setuptools \
    && /opt/venv/bin/python -m compileall -q /opt/venv/lib

# ---- run: the interpreter, the venv, nothing else; no compilers, no pip cache, non-root ----
FROM python:3.11-slim-bookworm
LABEL org.opencontainers.image.title="surge" \
      org.opencontainers.image.description="Prometheus metrics adapter and HPA-exact autoscaler for Kubernetes" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build /opt/venv /opt/venv
# The base interpreter's pip goes too. It is named by its path: `python` is the venv's (PATH), which has
# no pip. /adapter is where prometheus-adapter's Helm chart expects the binary.
RUN /usr/local/bin/python3 -m pip uninstall -q -y --root-user-action=ignore pip setuptools wheel \
    && ln -s /opt/venv/bin/surge-adapter /adapter
USER 65532:65532
WORKDIR /tmp
EXPOSE 6443
ENTRYPOINT ["/adapter"]
