# ghostfim: `make demo` sets everything up and completes code; `make test` runs the tests.
# Set-up (once, cached): a virtual environment in .venv, llama-cpp-python built with the CPU
# flags this machine needs (see engine/build_flags.py; GHOSTFIM_CUDA=1 adds the CUDA backend),
# the project with its test tools, and the tiny and small models in ~/.cache/ghostfim.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.ghostfim-setup
PYTEST_ARGS ?=

.PHONY: setup demo test lint vscode clean

setup: $(STAMP)

$(STAMP): pyproject.toml engine/build_flags.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	CMAKE_ARGS="$$($(PYTHON) engine/build_flags.py)" $(BIN)/python -m pip install -q -e '.[test]'
	$(BIN)/ghostfim models --fetch tiny
	$(BIN)/ghostfim models --fetch small
	touch $@

demo: setup
	$(BIN)/ghostfim complete docs/examples/stats.py:19:5 --type "return math.sq"

test: setup
	@$(BIN)/python -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: that is a failure here" >&2; fi; \
	exit $$rc

lint: setup
	$(BIN)/ruff check engine lsp bench tests
	$(BIN)/ruff format --check engine lsp bench tests

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
