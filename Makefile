# Set-up is part of every target: a fresh machine needs nothing but python3.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
# torch 2.13.0, the release gptlab is tested on, on every machine: here the CPU wheel on local disk,
# elsewhere what pip's index has for that release (PyPI's Linux wheel is the CUDA build); never an
# unpinned newer one. Override with `make TORCH_SPEC=... install`.
TORCH_SPEC ?= torch==2.13.0

.PHONY: install train test test-fast lint format sweep bench report mutants clean gpu-wheels

$(BIN)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	$(BIN)/pip install "$(TORCH_SPEC)"
	$(BIN)/pip install -e '.[dev]'
	# microsoft's mup, a test oracle: its metadata asks for torchvision (which would pull another torch);
	# the modules the test imports need only torch and pyyaml
	$(BIN)/pip install --no-deps "mup==1.0.0"
	touch $@

install: $(BIN)/.installed

train: install
	$(BIN)/python train.py $(ARGS)

# Two pytest-xdist workers, a test file each at a time (--dist loadfile: a module's fixtures, such as
# the documented-commands pools, run once). Serial, the suite is ~14 min on 2 cores; most of it is
# subprocesses and imports that leave the second core idle. --durations: every run (CI's too) lists
# where the time goes. TEST_WORKERS=0 runs it serially.
TEST_WORKERS ?= 2
XDIST := $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)

test: install
	$(BIN)/python -m pytest -q $(XDIST) --durations=30 $(ARGS)

test-fast: install
	$(BIN)/python -m pytest -q $(XDIST) -m "not slow and not multiproc" $(ARGS)

lint: install
	$(BIN)/ruff check src dev tests scripts *.py
	$(BIN)/ruff format --check src dev tests scripts *.py
	$(BIN)/lint-imports

format: install
	$(BIN)/ruff format src tests scripts *.py

sweep: install
	$(BIN)/python train.py -m experiment=$(or $(EXPERIMENT),ablate_placement) $(ARGS)

bench: install
	$(BIN)/python scripts/bench.py $(ARGS)

report: install
	$(BIN)/python scripts/report.py $(SWEEP)

# Deliberate breakages of src/ the suite must catch (slow; not CI): `make mutants ARGS="--only causal_mask"`
mutants: install
	$(BIN)/python scripts/mutation_check.py $(ARGS)

# The packages the lent GPU image lacks (hydra-core, omegaconf, antlr4, datasets, dill, multiprocess),
# pinned to this venv, as CPython 3.12 manylinux wheels in .whl/ (git-ignored; carried to the device;
# docs/performance.md, GPU check)
gpu-wheels: install
	$(BIN)/python dev/gpu_wheels.py --dest .whl

clean:
	rm -rf $(VENV) outputs multirun .cache
