# The two commands (see README): `make demo` runs the daily DAG end to end; `make test` runs lint, types, tests.
# `make test-fast` is the inner loop: the tests that start neither Spark nor an Airflow run.
# Each installs what it needs (venv, packages, Spark jars) and is safe to run twice.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv
# Re-install when the dependency list or the lock changes.
INSTALLED := $(VENV)/.installed-$(shell cat pyproject.toml requirements/constraints.txt | cksum | cut -d' ' -f1)
JARS := .cache/spark-jars/.fetched
LIVE ?=
DATE ?=

.PHONY: demo test test-fast bench lint install jars clean

$(PY):
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), f"Python 3.11 needed, found {sys.version}"'
	$(PYTHON) -m venv $(VENV)

$(INSTALLED): $(PY) pyproject.toml requirements/constraints.txt
	$(PY) -m pip install --quiet --disable-pip-version-check "uv>=0.9"
	$(UV) pip install --python $(PY) --quiet -c requirements/constraints.txt -e ".[dev]"
	rm -f $(VENV)/.installed-*
	touch $@

install: $(INSTALLED)

$(JARS): $(INSTALLED) provider/placsp_provider/spark/jars.py
	$(PY) -m placsp_provider.spark.jars fetch
	touch $@

jars: $(JARS)

demo: $(INSTALLED) $(JARS)
	$(PY) -m placsp_provider.demo.run $(if $(LIVE),--live) $(if $(DATE),--date $(DATE))

test: lint $(INSTALLED) $(JARS)
	$(PY) -m pytest

test-fast: $(INSTALLED)
	$(PY) -m pytest -m "(unit or http) and not spark and not airflow"

bench: $(INSTALLED) $(JARS)
	$(PY) -m benchmarks.run

lint: $(INSTALLED)
	$(VENV)/bin/ruff check provider dags include tests benchmarks
	$(VENV)/bin/ruff format --check provider dags include tests benchmarks
	$(VENV)/bin/mypy

clean:
	rm -rf .demo benchmarks/out
