# The two commands of the README: `make demo` and `make test`.
# Both create .venv when it is missing and install the package into it.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_ROOT ?= demo-run

.PHONY: demo test install clean bench browser test-slurm

# The report's browser test needs Debian's chromium; install it where it is missing.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test]'
	$(BIN)/python -m jsmf_dask.pipeline.warm_up
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m pipelines.demo --root $(DEMO_ROOT)

browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium (for the report's headless-browser test)"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium >/dev/null; }

# every core, each test file on one worker (its module fixtures built once); `pytest FILE` runs in one process
test: $(STAMP) browser
	$(BIN)/python -m pytest -q -n auto --dist loadfile

# Opt-in: installs and configures a single-node SLURM here (root, apt-get), runs deploy/slurm's recipe on it.
test-slurm: $(STAMP)
	bash deploy/slurm/test_slurm.sh

bench: $(STAMP)
	$(BIN)/python -m pipelines.benchmarks.cooccur

clean:
	rm -rf $(VENV) $(DEMO_ROOT) build *.egg-info
