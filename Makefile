# The two commands (see README): `make demo` runs the daily DAG end to end; `make test` runs lint, types, tests.
# `make test-fast` is the inner loop: the tests that start neither Spark nor an Airflow run (nor kill processes).
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
# Two pytest-xdist workers, one a core (decision 0056). A unit of work is a module, or every module of a
# costly shared session fixture, the long ones handed out first (tests/work_units.py).
# `make test TEST_WORKERS=0` runs in one process.
TEST_WORKERS ?= 2
WORKERS := $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder)

.PHONY: demo test test-fast system-test system-deps s3-server bench lint install jars class-archive clean

$(PY):
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), f"Python 3.11 needed, found {sys.version}"'
	$(PYTHON) -m venv $(VENV)

$(INSTALLED): $(PY) pyproject.toml requirements/constraints.txt
	$(PY) -m pip install --quiet --disable-pip-version-check "uv>=0.9"
	$(UV) pip install --python $(PY) --quiet --compile-bytecode -c requirements/constraints.txt -e ".[dev,all]"
	rm -f $(VENV)/.installed-*
	touch $@

install: $(INSTALLED)

$(JARS): $(INSTALLED) provider/placsp_provider/spark/jars.py
	$(PY) -m placsp_provider.spark.jars fetch
	touch $@

# The Spark driver's class archive (provider/placsp_provider/spark/class_archive.py): made once per
# JDK, Spark and jar set (about a minute), a no-op after; every JVM start then saves ~3 s.
class-archive: $(INSTALLED) $(JARS)
	$(PY) -m placsp_provider.spark.class_archive build

jars: $(JARS) class-archive

demo: $(INSTALLED) jars
	$(PY) -m placsp_provider.demo.run $(if $(LIVE),--live) $(if $(DATE),--date $(DATE))

# CI = `make test`: every test, the system test included (tests/system, marker `system`).
test: lint $(INSTALLED) jars system-deps s3-server
	$(PY) -m pytest $(WORKERS) --durations=25

# The S3-compatible server of tests/s3 (SeaweedFS, Apache-2.0): built once from the Go module proxy
# into .cache/seaweedfs (about 6 minutes on 2 cores), a no-op after.
s3-server: $(INSTALLED)
	$(PY) -m tests.s3.seaweedfs build

# The deployed shape (PostgreSQL, Airflow's services, Spark standalone, Chromium): tests/system.
system-test: lint $(INSTALLED) jars system-deps
	$(PY) -m pytest -m system tests/system

# Debian packages the system test runs: PostgreSQL (initdb/pg_ctl) and Chromium (driven by
# Playwright with executable_path; Playwright's own browser download is never used). Installed
# only when missing; `apt-get update` once before installing.
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
system-deps:
	@missing=""; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

test-fast: $(INSTALLED)
	$(PY) -m pytest $(WORKERS) -m "(unit or http) and not spark and not airflow and not system and not reliability"

# Every benchmark (docs/benchmarks.md); the S3 one starts s3-server's SeaweedFS on 127.0.0.1.
bench: $(INSTALLED) jars s3-server
	$(PY) -m benchmarks.run

lint: $(INSTALLED)
	$(VENV)/bin/ruff check provider dags include tests benchmarks
	$(VENV)/bin/ruff format --check provider dags include tests benchmarks
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

clean:
	rm -rf .demo benchmarks/out .system-test
