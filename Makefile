.PHONY: setup demo test lint fuzz
PY := .venv/bin/python

setup:
	@./scripts/setup.sh

demo: setup
	$(PY) -m demo

test: setup lint
	$(PY) -m pytest -q -n 3 --dist loadfile

lint: setup
	$(PY) -m ruff check .
	$(PY) -m mypy
	.venv/bin/lint-imports

fuzz: setup
	SURGE_FUZZ=1 $(PY) -m pytest -q -m fuzz tests
