.PHONY: setup demo test test-image image lint fuzz
PY := .venv/bin/python

setup:
	@./scripts/setup.sh

demo: setup
	$(PY) -m demo

test: setup lint
	@./scripts/setup.sh --tests
	$(PY) -m pytest -q -n 3 --dist loadfile

# Containers for real: the simulated kubelet's podman runtime, and the install path end to end (the image
# built here, the chart installed with RBAC enforced: tests/image/).
image:
	@./scripts/setup.sh --containers
	./scripts/build_image.sh

test-image: setup image
	$(PY) -m pytest -q -p no:xdist -m image tests

lint: setup
	$(PY) -m ruff check .
	$(PY) -m mypy
	.venv/bin/lint-imports

fuzz: setup
	SURGE_FUZZ=1 $(PY) -m pytest -q -m fuzz tests
