# The two entry points named in README.md. `.ci/run` calls `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CORES ?= all

.PHONY: install demo demo-mirror replica test test-fast test-slurm lint report protocol score prefetch lock mutate plan

$(BIN)/python:
	$(PY) -m venv $(VENV)

# torch==2.13.0 first: it resolves to the CPU wheel; a bare `torch` would pull a CUDA build. The stamp
# file skips pip (about 13 s for nothing) on every later `make demo`, `make test`, ... until pyproject.toml
# or this file (the torch pin) changes; the package is installed editable, so a change under src/ needs
# no reinstall. `rm .venv/.installed` forces one.
install: $(VENV)/.installed

$(VENV)/.installed: $(BIN)/python pyproject.toml Makefile
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev,slurm]'
	touch $@

demo: install
	$(BIN)/snakemake --cores $(CORES) --profile profiles/demo

# The demo's mirror world (README, "What the demo gives"): the demo's samples and RM scores judged for
# general quality (configs/mirror.yaml layered on configs/demo.yaml); reruns only the judge and what reads
# it, in the demo's results/. `make demo` switches back.
demo-mirror: install
	$(BIN)/snakemake --cores $(CORES) --profile profiles/demo --configfiles configs/demo.yaml configs/mirror.yaml

# The paper DAG on tiny local replicas of its hub models and data (README, configs/replica.yaml)
replica: install
	$(BIN)/snakemake --cores $(CORES) --configfile configs/replica.yaml

# One more RM scored beside the configured ones, without editing a config (README, "Score one RM"):
#   make score RM=<hub id or local folder> [KIND=classifier] [PROFILE=1] [NAME=...] [CONFIG=config.yaml]
#              [DIR=.] [TRUST_REMOTE_CODE=1] [PARAMS_B=8] [SMK_ARGS="..."]
# PROFILE=1 shows the RM the user's profile (use_profile); CONFIG=configs/demo.yaml scores it on the demo.
# (RM is make's own variable, "rm -f", unless given: the recipe refuses that default.)
KIND ?= classifier
CONFIG ?= config.yaml
DIR ?= .
score: $(BIN)/snakemake
	@test "$(origin RM)" != default -a -n "$(RM)" || { echo 'make score: give RM=<hub id or local folder>' >&2; exit 2; }
	$(BIN)/python -m prbench.scoring.one_rm --rm '$(RM)' --kind '$(KIND)' --config '$(CONFIG)' --directory '$(DIR)' \
		--cores $(CORES) $(if $(filter 1 true yes,$(PROFILE)),--profile) $(if $(NAME),--name '$(NAME)') \
		$(if $(filter 1 true yes,$(TRUST_REMOTE_CODE)),--trust-remote-code) $(if $(PARAMS_B),--params-b $(PARAMS_B)) \
		$(if $(SMK_ARGS),-- $(SMK_ARGS))

# score's refusal (no RM) and `make -n score` (tests/test_leaderboard.py) never run pip, even where the
# venv has no install stamp
$(BIN)/snakemake:
	$(MAKE) install

# On a login node with internet: every hub model and dataset config.yaml names, into the Hugging Face
# cache (HF_HOME), at each entry's revision, and the prompt files prompts.remote maps, into the prompt
# cache (prompts.remote.cache); then compute nodes run with HF_HUB_OFFLINE=1 (docs/CLUSTER.md).
prefetch: install
	PYTHONPATH=src $(BIN)/python -m prbench.prefetch --configfile $(CONFIG)
	HF_HUB_OFFLINE=1 PYTHONPATH=src $(BIN)/python -m prbench.prefetch --configfile $(CONFIG) --check

# What a config costs and can decide, before anything runs (docs/STUDY.md): job counts of its dry run,
# H100 GPU-hours per stage and RM size class, the verdict rule's power, the unpinned hub entries.
# CONFIG may name several files, layered in order: make plan CONFIG="config.yaml configs/study.yaml"
plan: install
	PYTHONPATH=src $(BIN)/python -m prbench.plan --configfiles $(CONFIG) $(PLAN_ARGS)

# Re-resolve every unpinned hub model and dataset (from the local cache; the hub when online) and
# rewrite the revision lock (config revisions.lock); later runs load exactly those commits.
lock: install
	PYTHONPATH=src $(BIN)/python -m prbench.revisions --configfile $(CONFIG) --refresh

report: demo
	$(BIN)/snakemake --profile profiles/demo --report report.html

# docs/PROTOCOL.md from docs/protocol.yaml (the protocol card as data; tests/test_protocol.py checks both)
protocol: $(BIN)/python
	$(BIN)/python -m prbench.protocol

# ruff (rules in pyproject.toml), snakefmt on the Snakefile and rules, and Snakemake's own linter
lint: install
	$(BIN)/ruff check .
	$(BIN)/snakefmt --check Snakefile rules
	$(BIN)/snakemake --lint --profile profiles/demo

# Two test workers (pytest-xdist; PYTEST_WORKERS=1 runs them in one process): a test module is one unit
# of work, the longest first (tests/conftest.py). One OMP thread each unless told.
PYTEST_WORKERS ?= 2
test: install
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} HF_HUB_OFFLINE=1 $(BIN)/pytest -q -rs -n $(PYTEST_WORKERS) --dist loadscope --no-loadscope-reorder

# The edit loop: the suite less the end-to-end runs (marker slow) and the tests that start Snakemake
# (marker dag: `pytest -m "dag and not slow"` runs those after an edit to rules/). An edit costs no pip
# run (install's stamp); `make test` stays the full suite. One OMP thread
# unless told: on a busy 2-core machine it took half the time that two did (3 min against 6).
test-fast: install
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} HF_HUB_OFFLINE=1 $(BIN)/pytest -q -rs -m "not slow and not dag"

# Mutation score of the modules that carry the project's claims (perf/mutate.py; the numbers in
# perf/README.md, "Mutation score"): mutmut (the `mutate` extra) on each module with its own fast
# tests, in work folders under .mutate/. Not part of CI. MODULES="comparison curves" runs some.
mutate: install
	$(BIN)/pip install -q -e '.[mutate]'
	nice -n 19 $(BIN)/python perf/mutate.py $(MODULES)

# A real single-node SLURM cluster on this machine (needs root and apt): docs/CLUSTER.md
test-slurm: install
	timeout -k 60 1500 bash tests/slurm/run_slurm_test.sh
