# tbex: `make run` (set up, build, run the seed example) and `make test` (set up, build, every test).
PY      := .venv/bin/python
BUILD   := build/cp311
JOBS    ?= $(shell nproc)

.PHONY: setup build run test test-cpp test-py test-wheel check-layers bench clean

setup:
	@./scripts/setup.sh

build: setup
	@$(PY) -m pip install -q --no-build-isolation --disable-pip-version-check \
	  -Cbuild-dir=$(BUILD) -Ccmake.define.CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) . \
	  || (echo "build failed; see the log above" && exit 1)

run: build
	$(PY) examples/tbe_doc_example.py

test-cpp: build
	.venv/bin/ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

test-py: build
	$(PY) -m pytest -q tests/python

# Includes only point to the same or a lower layer (the build enforces it too).
check-layers:
	python3 scripts/check_layers.py

test: check-layers test-cpp test-py

# The wheel is the SDK: built, installed into a fresh venv, and used as C, C++ and Python users do.
test-wheel: build
	JOBS=$(JOBS) ./scripts/test_wheel.sh

bench: build
	$(PY) bench/bench.py --quick

clean:
	rm -rf build
