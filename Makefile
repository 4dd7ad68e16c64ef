# The two entry points a new user needs: `make up` (run PAI here) and `make test` (run the suite).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# Exact versions of every dependency (and of pip and the build tools), so that an install today
# gets what the suite last passed with. `make lock` refreshes it on purpose.
LOCK := requirements.lock
# Installs take every version from the lock; the project is built with the locked setuptools.
LOCKED_INSTALL := $(PIP) install --quiet --constraint $(LOCK)

.PHONY: up test lint typecheck bench lock clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# Reinstall only when the project's metadata or the lock changed.
$(VENV)/.install-stamp: pyproject.toml $(LOCK) | $(PY)
	$(LOCKED_INSTALL) pip setuptools wheel
	$(LOCKED_INSTALL) --no-build-isolation -e .
	touch $@

$(VENV)/.install-stamp-test: pyproject.toml $(LOCK) | $(PY)
	$(LOCKED_INSTALL) pip setuptools wheel
	$(LOCKED_INSTALL) --no-build-isolation -e '.[test,ray]'
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

# Write the lock from pyproject.toml in a fresh virtualenv: versions already locked stay as they
# are, what is new gets its newest version; with UPGRADE=1 everything gets its newest version
# (torch: the CPU build the DDP example is tested with). Then run `make test`: it reinstalls
# from the new lock, and only a green suite makes the refreshed lock worth committing.
LOCK_VENV := .lock-venv
KEEP_LOCKED := $(if $(UPGRADE),,--constraint $(LOCK))
lock:
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install --quiet $(KEEP_LOCKED) --upgrade pip setuptools wheel
	$(LOCK_VENV)/bin/python -m pip install --quiet $(KEEP_LOCKED) -e '.[test,ray]' torch==2.13.0
	{ echo "# Written by \`make lock\` from pyproject.toml; do not edit by hand."; \
	  $(LOCK_VENV)/bin/python -m pip freeze --all --exclude-editable; } > $(LOCK).new
	mv $(LOCK).new $(LOCK)
	rm -rf $(LOCK_VENV)

clean:
	rm -rf $(VENV) $(LOCK_VENV) .pytest_cache .mypy_cache .ruff_cache
