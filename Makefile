# hostcrawl: `make demo` and `make test` work on a fresh machine with only Python 3.11+, make and pip.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: install demo test check lint format unit lock clean

$(STAMP): pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c requirements.lock -e '.[dev,redis]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)  ## crawl the built-in test web and print the audit (about 2 minutes)
	$(BIN)/hostcrawl demo $(DEMO_ARGS)

test: $(STAMP) check unit  ## lint, types and the whole test suite

unit: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

check: $(STAMP)  ## ruff lint + format check, mypy
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

lock: $(STAMP)  ## refresh requirements.lock from the current environment
	$(BIN)/python -m pip freeze --exclude-editable | grep -v '^hostcrawl' > requirements.lock

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
