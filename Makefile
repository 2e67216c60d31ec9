# ghostfim: `make demo` sets everything up and completes code; `make test` runs the tests.
# Set-up (once, cached): a virtual environment in .venv, llama-cpp-python built with the CPU
# flags this machine needs (see engine/setup/build_flags.py; GHOSTFIM_CUDA=1 adds the CUDA backend),
# the project with its test tools, and the tiny and small models in ~/.cache/ghostfim.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.ghostfim-setup
PYTEST_ARGS ?=

.PHONY: setup demo test lint wheel vsix e2e clean

setup: $(STAMP)

$(STAMP): pyproject.toml engine/setup/build_flags.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	@# A CUDA build (GHOSTFIM_CUDA=1; needs nvcc, no GPU): cuBLAS from pip when the toolkit has
	@# none, then llama-cpp-python built into a wheel folder of its own (pip's wheel cache is
	@# keyed by the sdist alone and would hand back the CPU wheel). See engine/setup/build_flags.py.
	req="$$($(BIN)/python engine/setup/build_flags.py --cublas-requirement)" && \
	  if [ -n "$$req" ]; then $(BIN)/python -m pip install -q "$$req"; fi
	args="$$($(BIN)/python engine/setup/build_flags.py)" && \
	  case "$$args" in *GGML_CUDA=on*) \
	    dir="$$($(BIN)/python engine/setup/build_flags.py --wheel-dir)" && \
	    { ls "$$dir"/llama_cpp_python-*.whl >/dev/null 2>&1 || \
	      CMAKE_ARGS="$$args" $(BIN)/python -m pip wheel -q --no-deps --no-cache-dir \
	        -w "$$dir" llama-cpp-python==0.3.36; } && \
	    $(BIN)/python -m pip install -q --no-deps --force-reinstall "$$dir"/llama_cpp_python-*.whl;; \
	  esac && \
	  CMAKE_ARGS="$$args" $(BIN)/python -m pip install -q -e '.[test]'
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
	$(BIN)/ruff check engine lsp cli bench tests harness
	$(BIN)/ruff format --check engine lsp cli bench tests harness
	@# mypy resolves modules by folder: link engine/ and lsp/ under their installed names
	@# (pyproject's [tool.mypy] reads build/mypy-src and checks both packages strictly).
	mkdir -p build/mypy-src/ghostfim
	ln -sfn ../../../engine build/mypy-src/ghostfim/engine
	ln -sfn ../../../lsp build/mypy-src/ghostfim/lsp
	ln -sfn ../../../cli build/mypy-src/ghostfim/cli
	$(BIN)/mypy

# The ghostfim wheel, dist/ghostfim-<version>-py3-none-any.whl: engine, lsp and cli (no tests, no
# benchmarks). `pip install` (or pipx, or uv tool install) it anywhere, then `ghostfim setup`.
# pip builds it from this folder with setuptools from PyPI; a Python without pip (Debian's
# without python3-pip) lends a throwaway venv's. setuptools builds in build/lib, whose leftovers
# (a module since deleted) would end up in the wheel: it starts empty.
wheel:
	rm -rf build/lib build/bdist.* dist/ghostfim-*.whl
	if $(PYTHON) -m pip --version >/dev/null 2>&1; then pip="$(PYTHON) -m pip"; else \
	  $(PYTHON) -m venv build/wheel-venv && pip="build/wheel-venv/bin/python -m pip"; fi && \
	  $$pip wheel -q --no-deps --no-cache-dir --disable-pip-version-check -w dist .

# The VS Code extension, packaged: editors/vscode/ghostfim-<version>.vsix (npm ci once per lock),
# carrying the wheel above in server/: the extension sets its own server up from it.
VSCODE := editors/vscode
vsix: wheel $(VSCODE)/node_modules/.package-lock.json
	rm -rf $(VSCODE)/server $(VSCODE)/ghostfim-*.vsix
	mkdir -p $(VSCODE)/server
	cp dist/ghostfim-*.whl $(VSCODE)/server/
	cd $(VSCODE) && npm run package

$(VSCODE)/node_modules/.package-lock.json: $(VSCODE)/package-lock.json
	cd $(VSCODE) && npm ci --no-audit --no-fund

# The packaged extension inside a real VS Code (code-server + headless Chromium). Installs
# code-server, Node 24 and Playwright into ~/.cache/ghostfim/e2e the first time (see
# tests/e2e/vscode/setup.sh); E2E_ARGS go to tests/e2e/vscode/e2e.py (--help).
# E2E_ARGS=--fresh-install: a user with no ghostfim anywhere clicks Set up ghostfim.
E2E_ARGS ?=
e2e: setup vsix
	bash tests/e2e/vscode/run.sh $(E2E_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
