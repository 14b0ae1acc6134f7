# Two commands set everything up on a fresh machine: `make demo` and `make test`
# (`make install` sets up alone).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: help install demo test test-slow test-accuracy check param-names clean

# Each step says what it does and about how long it takes on 2 cores (1-1.5 minutes in all);
# pip's own lines (no --quiet) show the install's progress.
$(STAMP): setup.cfg pyproject.toml
	@test -x $(PY) || echo "make install: creating $(VENV) (10-20 s)"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "make install: upgrading pip in $(VENV) (5-15 s)"
	$(PY) -m pip install --quiet --upgrade pip
	@echo "make install: installing the checkout, MXNet and the test extras (about a minute)"
	$(PY) -m pip install -e '.[test]'
	touch $(STAMP)

# Each target with the line after its "##"; installs and runs nothing.
help:  ## list the targets, one line each
	@awk -F ':.*## ' '/^[a-z-]+:.*## / {printf "make %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# Set up only: .venv with the checkout installed (editable, test extras); runs nothing.
install: $(STAMP)  ## create .venv and install the checkout into it (editable, test extras); runs nothing

demo: $(STAMP)  ## the main job: train ssd_mobilenetv2_stride8 on the embedded shapes, evaluate, draw, export (about 5 min)
	$(PY) -m zoo quickstart --output-dir output

check: $(STAMP)  ## check every registered config against its graph and print the table
	$(PY) -m zoo check

# --max-worker-restart 0: a crashed worker ends the run with its report. pytest-xdist 3.8
# replaces it otherwise, and under --dist loadfile the run can then hang at its end.
test: $(STAMP)  ## the test suite without the slow and accuracy tests (about 11 min on 2 cores)
	MALLOC_ARENA_MAX=2 $(PY) -m pytest -m "not slow and not accuracy" -q -n 2 --dist loadfile --max-worker-restart 0

test-slow: $(STAMP)  ## the tests marked slow
	$(PY) -m pytest -m slow -q

# Short recipes for SSD, Faster R-CNN C4 and FPN trained on the embedded data, each failing
# outside its measured held-out bands (zoo/jobs/recipes.py), a seeded run reproduced quiet
# and busy, and the SSD parity check against GluonCV's training (about 33 minutes on 2 cores).
test-accuracy: $(STAMP)  ## train the SSD, C4 and FPN recipes; fail outside their accuracy bands; parity with GluonCV (about 33 min)
	$(PY) -m pytest -m accuracy -q -p no:cacheprovider

# Rewrite tests/data/param_names.json (every registered model's parameter names, pinned by
# tests/symbols/backbones/test_param_names.py) after adding a model or renaming parameters on purpose.
param-names: $(STAMP)  ## rewrite tests/data/param_names.json after a model's parameters change on purpose
	PYTHONPATH=$(CURDIR):$(CURDIR)/tests $(PY) tests/symbols/backbones/test_param_names.py

clean:  ## remove .venv and the build files
	rm -rf $(VENV) build *.egg-info
