# The two entry points named in README.md. `.ci/run` calls `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CORES ?= all

.PHONY: install demo replica test test-fast test-slurm lint report prefetch

$(BIN)/python:
	$(PY) -m venv $(VENV)

# torch==2.13.0 first: it resolves to the CPU wheel; a bare `torch` would pull a CUDA build.
install: $(BIN)/python
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev,slurm]'

demo: install
	$(BIN)/snakemake --cores $(CORES) --profile profiles/demo

# The paper DAG on tiny local replicas of its hub models and data (README, configs/replica.yaml)
replica: install
	$(BIN)/snakemake --cores $(CORES) --configfile configs/replica.yaml

# On a login node with internet: every hub model and dataset config.yaml names, into the Hugging Face
# cache (HF_HOME), at each entry's revision; then compute nodes run with HF_HUB_OFFLINE=1 (docs/CLUSTER.md).
CONFIG ?= config.yaml
prefetch: install
	PYTHONPATH=src $(BIN)/python -m prbench.prefetch --configfile $(CONFIG)
	HF_HUB_OFFLINE=1 PYTHONPATH=src $(BIN)/python -m prbench.prefetch --configfile $(CONFIG) --check

report: demo
	$(BIN)/snakemake --profile profiles/demo --report report.html

# ruff (rules in pyproject.toml), snakefmt on the Snakefile and rules, and Snakemake's own linter
lint: install
	$(BIN)/ruff check .
	$(BIN)/snakefmt --check Snakefile rules
	$(BIN)/snakemake --lint --profile profiles/demo

test: install
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} HF_HUB_OFFLINE=1 $(BIN)/pytest -q -rs

# The edit loop: the suite less the end-to-end runs (marker slow) and the tests that start Snakemake
# (marker dag: `pytest -m "dag and not slow"` runs those after an edit to rules/). Installs only into
# a venv without pytest, so an edit costs no pip run; `make test` stays the full suite. One OMP thread
# unless told: on a busy 2-core machine it took half the time that two did (3 min against 6).
test-fast: $(BIN)/pytest
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} HF_HUB_OFFLINE=1 $(BIN)/pytest -q -rs -m "not slow and not dag"

$(BIN)/pytest:
	$(MAKE) install

# A real single-node SLURM cluster on this machine (needs root and apt): docs/CLUSTER.md
test-slurm: install
	timeout -k 60 1500 bash tests/slurm/run_slurm_test.sh
