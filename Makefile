# The two entry points a newcomer needs (see README.md):
#   make demo   set up and serve the example site at http://127.0.0.1:8000/
#   make test   set up and run the whole test suite (what .ci/run runs)
#   make docs   build the documentation site into build/docs/ (make docs-serve: live)
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test docs docs-serve lint typecheck clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade "pip>=25.1"
	$(PY) -m pip install --quiet -e ".[s3,redis,metrics]" --group test
	touch $(STAMP)

demo: $(STAMP)
	$(PY) example_project/manage.py migrate --noinput
	$(PY) example_project/manage.py make_samples
	$(PY) example_project/manage.py runserver 127.0.0.1:8000

# Lint and `mypy --strict` first (quick), then the suite. The docs are built
# (strictly) by tests/test_docs.py, and the browser test drives Debian's
# chromium, so `make test` checks both.
test: lint typecheck
	$(PY) -m pytest

# docs/settings.md is generated from django_oximg/conf.py; regenerate it
# first (tests/test_conf.py fails when the committed copy is stale).
docs: $(STAMP)
	$(PY) -m django_oximg.conf > docs/settings.md
	$(VENV)/bin/mkdocs build --strict

docs-serve: $(STAMP)
	$(PY) -m django_oximg.conf > docs/settings.md
	$(VENV)/bin/mkdocs serve --strict --dev-addr 127.0.0.1:8001

lint: $(STAMP)
	$(VENV)/bin/ruff check django_oximg tests bench example_project
	$(VENV)/bin/ruff format --check django_oximg tests bench example_project

typecheck: $(STAMP)
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) example_project/var .pytest_cache build/docs
