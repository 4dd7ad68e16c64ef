# The two entry points a new user needs: `make up` (run PAI here) and `make test` (run the suite).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip

.PHONY: up test lint typecheck bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

# Reinstall only when the project's metadata changed.
$(VENV)/.install-stamp: pyproject.toml | $(PY)
	$(PIP) install --quiet -e .
	touch $@

$(VENV)/.install-stamp-test: pyproject.toml | $(PY)
	$(PIP) install --quiet -e '.[test]'
	touch $(VENV)/.install-stamp $@

up: $(VENV)/.install-stamp
	$(VENV)/bin/pai up $(ARGS)

test: $(VENV)/.install-stamp-test
	$(PY) -m pytest $(PYTEST_ARGS)

lint: $(VENV)/.install-stamp-test
	$(PY) -m ruff check src tests benchmarks
	$(PY) -m ruff format --check src tests benchmarks

typecheck: $(VENV)/.install-stamp-test
	$(PY) -m mypy

bench: $(VENV)/.install-stamp-test
	for b in benchmarks/*.py; do $(PY) $$b --json || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
