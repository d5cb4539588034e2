# The README's two commands are `make run` and `make test`; both start from a
# fresh clone as root and install what they need from this repository's files.
# The system's interpreter, not the first python3 in root's PATH: a venv made
# on an interpreter in root's home (pyenv, mode 700) is one nobody else can
# run, and `oslens` is meant to be usable unprivileged too.
SYSTEM_PYTHON := $(firstword $(wildcard /usr/bin/python3 /usr/local/bin/python3))
PYTHON ?= $(if $(SYSTEM_PYTHON),$(SYSTEM_PYTHON),python3)
VENV   := .venv
PY     := $(VENV)/bin/python

.PHONY: run test install deps engine bench clean

run: install
	$(VENV)/bin/oslens scale --quick
	$(VENV)/bin/oslens report last -o oslens-report.html

# Tests exercise `oslens cluster`: Open MPI is installed before the engine
# is built, so that the install carries oslens-engine-mpi.
test: DEPS = test
test: install
	@sh scripts/install-deps.sh test
	$(PY) -m pytest -q

install: deps $(PY)
	$(PY) -m pip install -q --disable-pip-version-check '.[test]'

deps:
	@sh scripts/install-deps.sh $(DEPS)

$(PY):
	$(PYTHON) -m venv $(VENV)

engine:
	$(MAKE) -C engine

bench: install
	$(PY) bench/instrument.py
	$(PY) bench/latency.py
	$(PY) bench/noise.py
	$(PY) bench/profile.py
	$(PY) bench/explain.py

clean:
	$(MAKE) -C engine clean
	rm -rf $(VENV) build src/*.egg-info
