# The README's two commands: `make run` and `make test`. Both set everything up first: system
# packages (when run as root), a virtual environment at .venv, the Python deps and the C++ build.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
DEPS_STAMP := $(VENV)/.deps-installed
SYSTEM_PACKAGES := libgtest-dev ccache ninja-build cmake

.PHONY: run test build system-deps cpp-test py-test bench clean

system-deps:
	@missing=""; for p in $(SYSTEM_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing$$missing"; apt-get update -qq && apt-get install -y -qq $$missing >/dev/null; \
	  else echo "please install:$$missing (sudo apt-get install$$missing)"; exit 1; fi; \
	fi

$(DEPS_STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0 xla-cpu-pjrt==0.0.1 numpy pytest expecttest setuptools \
	  transformers==5.24.0 "jax[cpu]==0.10.2" tokamax==0.0.12
	touch $(DEPS_STAMP)

build: system-deps $(DEPS_STAMP)
	$(PY) -m pip install -q -e . --no-build-isolation --no-deps

run: build
	$(PY) examples/demo.py
	$(PY) examples/train_gpt.py --steps 60

cpp-test: build
	./build/torchtpu_cpp_tests --gtest_brief=1

# Everything in Strict mode, and the op suites again in the other two eager modes, as pytest jobs
# side by side (one per core): tests/run.py says which.
py-test: build
	$(PY) tests/run.py

test: cpp-test py-test

bench: build
	$(PY) benchmarks/op_overhead.py
	$(PY) benchmarks/eager_step.py
	$(PY) benchmarks/eager_modes.py
	$(PY) benchmarks/compile.py
	$(PY) benchmarks/warm_start.py
	$(PY) benchmarks/index_checks.py
	$(PY) benchmarks/amp.py
	$(PY) benchmarks/collectives.py
	$(PY) benchmarks/ddp_step.py
	$(PY) benchmarks/kernels.py
	$(PY) benchmarks/program_text.py
	$(PY) benchmarks/bounded_shapes.py
	$(PY) benchmarks/dynamic_shapes.py
	$(PY) benchmarks/compiled_call.py
	$(PY) benchmarks/train_mfu.py
	$(PY) benchmarks/default_mode.py
	$(PY) benchmarks/decoding.py

clean:
	rm -rf build torchtpu/*.so
