# Two entry points, each installs what it needs on a fresh machine:
#   make reproduce   the main job: every experiment notebook on the offline corpus, cpu profile, in its eight parts
#   make test        ruff, the export check, nbdev_test over the notebooks, and pytest tests/
# and the companion site: make docs (into _docs/), make docs-test (the site in headless Chromium)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PROFILE ?= cpu
TORCH_PIN := torch==2.13.0

.PHONY: setup data test lint check-export nbtest site-deps pytest reproduce clean-runs docs-setup docs chromium docs-test notebook-metadata

setup: $(VENV)/.installed

# torch is pinned and installed first: a bare torch requirement on a machine without it pulls a CUDA build.
$(VENV)/.installed: settings.ini setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet $(TORCH_PIN)
	# the pin again: a requirement of an extra (transformer-lens's torch>=2.6) must not swap in another torch build
	$(BIN)/python -m pip install --quiet -e ".[dev]" $(TORCH_PIN)
	# nbdev_clean stores the kernel's display name as "python3": give the kernel that name, so the kernelspec
	# JupyterLab writes into a notebook it opens is the one stored (language_info: see notebook-metadata)
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

# ruff (configured in pyproject.toml) over the library, the notebooks, the tests and the site's scripts: the lint,
# and the formatter where it applies
lint: setup
	$(BIN)/ruff check posenc_nb nbs tests
	$(BIN)/ruff format --check posenc_nb nbs tests

# one torch thread a notebook (unless OMP_NUM_THREADS says otherwise): nbdev_test runs a notebook a core, and notebooks
# of a thread a core each spin against each other (04a_evaluate: 164 s among the others, 39 s on a thread each)
nbtest: setup data
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} $(BIN)/nbdev_test --do_print --timing

# The site's browser tests (tests/test_site.py) need Chromium and the docs extra: make test installs both where it can
# (Debian's chromium, as root or through a sudo that asks no password) and otherwise runs every other test, those
# skipped with the reason. A contributor skips the slowest tests with: make pytest PYTEST_FLAGS='-m "not slow"'
site-deps: setup
	@{ $(MAKE) --no-print-directory chromium SUDO="$(SUDO:sudo=sudo -n)" && \
	   $(MAKE) --no-print-directory docs-setup; } || \
	 echo "make test: the site's browser tests will be skipped (Chromium or the docs extra is missing: see above)" >&2

pytest: setup data site-deps
	$(BIN)/python -m pytest -q -n auto --dist loadfile --durations=12 $(PYTEST_FLAGS) tests  # a worker a core, a file a worker

test: lint check-export nbtest pytest

# The full run: every experiment notebook in order, all eight parts (`posenc-reproduce plan` says each part's
# minutes here); run again after a cut, it goes on after the notebooks already published. One part alone:
# posenc-reproduce --part paper
reproduce: setup data
	$(BIN)/posenc-reproduce --profile $(PROFILE)

clean-runs:
	rm -rf runs

# JupyterLab writes its kernel's language_info into every notebook it opens; nbdev_clean keeps it (settings.ini,
# allowed_metadata_keys). Writing it once into every notebook under nbs/ lets them open unmodified.
notebook-metadata: setup
	$(BIN)/python nbs/_site/kernel_metadata.py

docs-setup: $(VENV)/.docs-installed

$(VENV)/.docs-installed: $(VENV)/.installed settings.ini setup.py
	$(BIN)/python -m pip install --quiet -e ".[docs]"
	touch $@

# The site, from the committed notebooks and README; nothing is executed. Serve it: python -m http.server -d _docs
docs: docs-setup
	$(BIN)/python nbs/_site/build.py

# Debian's Chromium, driven by Playwright (Playwright's own browser download needs a host outside the registries).
# Where it cannot be installed (no network, no sudo), one paragraph says what is needed and how to get it.
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
chromium:
	@test -n "$$POSENC_CHROMIUM" || command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
	  { $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } || \
	  { echo "make docs-test: the site's browser test needs Chromium, which is not on PATH and could not be installed" \
	         "here (apt-get failed: see its message above; no network, or no sudo?). Install it (Debian or Ubuntu:" \
	         "sudo apt-get install chromium), or set POSENC_CHROMIUM to a Chromium binary, then rerun make docs-test." >&2; \
	    exit 1; }

# Chromium first: without it, nothing is built in vain
docs-test: chromium docs
	$(BIN)/python -m pytest -q tests/test_site.py
