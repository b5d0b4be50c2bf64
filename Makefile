# tbex: `make run` (set up, build, run the seed example) and `make test` (set up, build, every test).
PY      := .venv/bin/python
BUILD   := build/cp311
JOBS    ?= $(shell nproc)
CMAKE   := $(shell test -x .venv/bin/cmake && echo .venv/bin/cmake || echo cmake)

.PHONY: setup build run test test-cpp test-py test-wheel test-asan test-large fuzz-long fuzz-geometries check-layers bench clean

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
	$(PY) -m pytest -q -n $(JOBS) tests/python

# Includes only point to the same or a lower layer (the build enforces it too).
check-layers:
	python3 scripts/check_layers.py

test: check-layers test-cpp test-py

# The C++ tests under ASan + UBSan, in their own build directory (docs/fuzzing.md: how long).
ASAN_BUILD := build/asan
test-asan: setup
	$(CMAKE) -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DTBEX_SANITIZE=ON -DTBEX_BUILD_PYTHON=OFF -DPython_EXECUTABLE=$(abspath $(PY)) >/dev/null
	$(CMAKE) --build $(ASAN_BUILD) -j$(JOBS)
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  .venv/bin/ctest --test-dir $(ASAN_BUILD) --output-on-failure -j$(JOBS) $(ASAN_CTEST_ARGS)

# A dW whose x has more than 2^31 elements (about 1 GB of memory touched; a minute).
test-large: build
	$(PY) tests/large/large_dw.py

# Random valid geometries through every ranked schedule against the float64 oracle (docs/fuzzing.md).
# The forward conv has no Python entry: its random geometries are a GoogleTest, run longer here.
fuzz-geometries: build
	$(PY) tests/fuzz/fuzz_geometries.py --cases 400 --seed 1
	$(PY) tests/fuzz/fuzz_geometries.py --tiles --dtypes bfloat16 --cases 100 --seed 2
	TBEX_TEST_FWD_CASES=200 $(BUILD)/tests/cpp/tbex_forward_tests \
	  --gtest_filter=ForwardKernel.RandomGeometriesMatchReference

# The fuzzer's long run: a million calls (mostly malformed), its summary in build/fuzz-long.json.
fuzz-long: build
	$(PY) tests/fuzz/fuzz_args.py --cases 1000000 --rates 0.5,1 --first 1000000000 \
	  --jobs $(JOBS) --report build/fuzz-long.json

# The wheel is the SDK: built, installed into a fresh venv, and used as C, C++ and Python users do.
test-wheel: build
	JOBS=$(JOBS) ./scripts/test_wheel.sh

bench: build
	$(PY) bench/bench.py --quick

clean:
	rm -rf build
