# Two commands do all the set-up on a fresh machine:
#   make run    -- install into .venv and start the app with its built-in default scenario
#   make test   -- install into .venv and run the whole test suite
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 8501
# The app listens on this machine only; `make run HOST=0.0.0.0` opens it to the network.
HOST ?= 127.0.0.1

.PHONY: run test setup native lint bench bench-executor example clean

$(BIN)/.installed: requirements.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip >/dev/null
	$(BIN)/pip install -r requirements.txt
	touch $@

# The synthesizer's hot modules compiled with Cython (synth/_compiled, about 1 min the first
# time; a module whose source changed since is rebuilt). Optional: without a C compiler
# one line says so and the same code runs as pure Python, only slower.
native: $(BIN)/.installed
	@$(BIN)/python -m synth.build --if-stale || echo "make: the synthesizer runs as pure Python (python -m synth.build failed)"

setup: $(BIN)/.installed native

run: setup
	$(BIN)/python -m ui.serve --server.headless true --server.address $(HOST) --server.port $(PORT)

example: setup
	$(BIN)/python -m synth plan --mesh x=2,y=4 --src '[1024{y}, 512, 256{x}]' --dst '[1024, 512{x,y}, 256]'

# The browser test needs Debian's Chromium: installed here when missing and the user may
# (root or passwordless sudo); otherwise one line says how and that test skips.
test: setup
	@.ci/ensure-chromium
	$(BIN)/python -m pytest

lint: setup
	$(BIN)/ruff check .

bench: setup
	$(BIN)/python -m synth bench
	$(BIN)/python -m synth bench --planner search --cases 500
	$(BIN)/python -m simulator bench
	$(BIN)/python -m simulator agreement
	$(BIN)/python -m ui.bench

bench-executor: setup
	$(BIN)/python -m executor report --cases 30

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .ruff_cache synth/_compiled
