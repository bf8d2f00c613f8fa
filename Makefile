# The two entry points a newcomer needs (see README.md):
#   make demo   set up and serve the example site at http://127.0.0.1:8000/
#   make test   set up and run the whole test suite (what .ci/run runs)
#   make docs   build the documentation site into build/docs/ (make docs-serve: live)
#   make stress run the suite 3 times in a row while a second copy of it runs
#               beside it, to catch tests that need an idle machine; fails if
#               any run of either copy fails (tests/stress.py). Long: about
#               six times the suite's own time. Smaller: STRESS_RUNS=1, or
#               STRESS_ARGS="tests/test_executor.py tests/test_metrics.py".
#               Its temporary files are its own, so `make test` may run too.
#
# The suite runs on two Djangos, each in its own virtualenv:
#   .venv                 Django 5.2 LTS on $(PYTHON): lint, mypy, the suite;
#                         also the demo's, the docs' and the benchmarks' venv
#   .venv-django-newest   Django's newest release on $(NEWEST_PYTHON): the suite's
#                         tests that depend on Django (see `test` below)
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# The demo's packages only; DOCS_STAMP adds the docs' (MkDocs), STAMP
# everything the tests need (the docs' included).
DEMO_STAMP := $(VENV)/.installed-demo
DOCS_STAMP := $(VENV)/.installed-docs
STAMP := $(VENV)/.installed
DJANGO_LTS := Django~=5.2.0

# Django 6 needs Python 3.12 or newer, and Debian 12's python3 is 3.11: take
# the newest python3.1x on PATH that runs, else the newest under pyenv.
NEWEST_PYTHON ?= $(shell for p in python3.14 python3.13 python3.12 \
	  $$(ls -d "$${PYENV_ROOT:-$$HOME/.pyenv}"/versions/3.1[2-9]*/bin/python3 2>/dev/null | sort -rV); do \
	  "$$p" -c 'import sys; sys.version_info >= (3, 12) and print(sys.executable)' 2>/dev/null \
	  | grep . && break; done)
NEWEST_VENV := .venv-django-newest
NEWEST_STAMP := $(NEWEST_VENV)/.installed

# Installs read both files: a changed dependency or install line reinstalls.
INSTALL_INPUTS := pyproject.toml Makefile

.PHONY: demo test test-lts test-newest stress docs docs-serve lint typecheck clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade "pip>=25.1"

$(DEMO_STAMP): $(VENV)/bin/python $(INSTALL_INPUTS)
	$(PY) -m pip install --quiet -e . "$(DJANGO_LTS)"
	touch $(DEMO_STAMP)

# The package and Django (docs/settings.md is generated from its settings
# class), and the `docs` group: not the test group's servers and browsers.
$(DOCS_STAMP): $(VENV)/bin/python $(INSTALL_INPUTS)
	$(PY) -m pip install --quiet -e . "$(DJANGO_LTS)" --group docs
	touch $(DOCS_STAMP)

$(STAMP): $(VENV)/bin/python $(INSTALL_INPUTS)
	$(PY) -m pip install --quiet -e ".[s3,redis,metrics]" --group test --group oscar "$(DJANGO_LTS)"
	touch $(STAMP)

# --clear: a rebuilt venv starts empty, whichever Python it had before.
$(NEWEST_STAMP): $(INSTALL_INPUTS)
	@test -n "$(NEWEST_PYTHON)" || { echo "make: Django's newest release needs Python 3.12+;" \
	  "none found. Install one, or run: make test NEWEST_PYTHON=/path/to/python3.12" >&2; exit 1; }
	"$(NEWEST_PYTHON)" -m venv --clear $(NEWEST_VENV)
	$(NEWEST_VENV)/bin/python -m pip install --quiet --upgrade "pip>=25.1"
	$(NEWEST_VENV)/bin/python -m pip install --quiet \
	  -e ".[s3,redis,metrics]" --group test Django
	$(NEWEST_VENV)/bin/python -m pip install --quiet --group oscar \
	  "Django==$$($(NEWEST_VENV)/bin/python -m django --version)" \
	  || echo "make: django-oscar does not support this Django yet;" \
	    "tests/test_oscar.py skips on it" >&2
	touch $(NEWEST_STAMP)

demo: $(DEMO_STAMP)
	$(PY) example_project/manage.py migrate --noinput
	$(PY) example_project/manage.py make_samples
	$(PY) example_project/manage.py runserver 127.0.0.1:8000

# Lint and `mypy --strict` first (quick), then the suite on each Django. The
# docs are built (strictly) by tests/test_docs.py, the distributions by
# tests/test_packaging.py, and the browser test drives Debian's chromium, so
# `make test` checks all of them. A pytest exit status other than 0 (5 when
# no test was collected, too) stops make with an error. The newest Django's
# venv is made first, so a machine without Python 3.12+ stops at once.
#
# Each run spreads its tests over TEST_WORKERS processes (pytest-xdist; 2 by
# default, CI's cores: `make test TEST_WORKERS=auto` takes one per core), a
# test file per process at a time, so that the servers a module starts for
# its tests are started once. The tests marked `serial` (answers within
# deadlines of seconds, under load) run after the others, in one process.
# The LTS run runs every test; the newest Django's leaves out the tests
# marked `django_free` (modules that never touch Django,
# tests/test_core_isolation.py proves it) and `one_django` (whose subject is
# a server process, a built wheel or the docs, each saying why), which the
# LTS run has run. Every `serial` test is also `one_django`, so the newest
# Django's run has no serial pass (it would collect nothing: exit status 5);
# a `serial` test that was not would run there among the others.
TEST_WORKERS ?= 2
PYTEST_PARALLEL = -n $(TEST_WORKERS) --dist loadfile

test: $(NEWEST_STAMP) lint typecheck test-lts test-newest

test-lts: $(STAMP)
	$(PY) -m pytest $(PYTEST_PARALLEL) -m "not slow and not serial"
	$(PY) -m pytest -p no:xdist -m "not slow and serial"

test-newest: $(NEWEST_STAMP)
	$(NEWEST_VENV)/bin/python -m pytest $(PYTEST_PARALLEL) \
	  -m "not slow and not django_free and not one_django"

# On Django 5.2 LTS only: races do not depend on Django's version.
STRESS_RUNS ?= 3
STRESS_ARGS ?=
stress: $(STAMP)
	$(PY) tests/stress.py --runs $(STRESS_RUNS) -- $(STRESS_ARGS)

# docs/settings.md is generated from django_oximg/conf.py; regenerate it
# first (tests/test_conf.py fails when the committed copy is stale).
docs: $(DOCS_STAMP)
	$(PY) -m django_oximg.settings_reference > docs/settings.md
	$(VENV)/bin/mkdocs build --strict

docs-serve: $(DOCS_STAMP)
	$(PY) -m django_oximg.settings_reference > docs/settings.md
	$(VENV)/bin/mkdocs serve --strict --dev-addr 127.0.0.1:8001

lint: $(STAMP)
	$(VENV)/bin/ruff check django_oximg tests bench example_project
	$(VENV)/bin/ruff format --check django_oximg tests bench example_project

typecheck: $(STAMP)
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) $(NEWEST_VENV) example_project/var .pytest_cache build/docs dist
