# Two entry points, each installs what it needs on a fresh machine:
#   make reproduce   the main job: every experiment notebook on the offline corpus, cpu profile
#   make test        nbdev_test over the notebooks, pytest tests/, and the export check
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PROFILE ?= cpu
TORCH_PIN := torch==2.13.0

.PHONY: setup data test check-export nbtest pytest reproduce clean-runs

setup: $(VENV)/.installed

# torch is pinned and installed first: a bare torch requirement on a machine without it pulls a CUDA build.
$(VENV)/.installed: settings.ini setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet $(TORCH_PIN)
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	# nbdev_clean stores the kernel's display name as "python3": give the kernel that name, so JupyterLab opens a
	# notebook without rewriting its metadata (and asking to save on close)
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 --display-name python3 >/dev/null
	touch $@

data: setup
	$(BIN)/posenc-data fetch

# Notebooks are the source of truth: exporting them must not change the library.
check-export: setup
	@snap=$$(mktemp -d) && cp -r posenc_nb "$$snap/" && $(BIN)/nbdev_export && \
	if ! diff -r -q -x __pycache__ "$$snap/posenc_nb" posenc_nb; then \
	  echo "nbdev_export changed posenc_nb/: edit the notebooks, export, and commit both."; rm -rf "$$snap"; exit 1; fi; \
	rm -rf "$$snap"

nbtest: setup data
	$(BIN)/nbdev_test --do_print --timing

pytest: setup data
	$(BIN)/python -m pytest -q tests

test: check-export nbtest pytest

reproduce: setup data
	$(BIN)/posenc-reproduce --profile $(PROFILE)

clean-runs:
	rm -rf runs
