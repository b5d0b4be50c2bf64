#!/usr/bin/env bash
# make test-wheel: the wheel is the whole SDK. Builds the wheel (reusing the build directory),
# installs it into a fresh venv that sees no source tree, and from a scratch directory there:
# runs the seed example, tbexc (the console script and the bundled binary), builds and runs the
# CMake AOT example and the Ascend C example against `python -m tbex --cmake-dir`, and builds and
# runs the aclnn C example
# with plain gcc and no LD_LIBRARY_PATH. The venv is then moved, and the AOT example rebuilt.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py="$root/.venv/bin/python"
jobs=${JOBS:-$(nproc)}
work=$(mktemp -d "${TMPDIR:-/tmp}/tbex-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "test-wheel: building the wheel"
"$py" -m pip wheel -q --no-deps --no-build-isolation --disable-pip-version-check \
  -Cbuild-dir="$root/build/cp311" -Ccmake.define.CMAKE_BUILD_PARALLEL_LEVEL="$jobs" \
  -w "$work/dist" "$root" >/dev/null
wheel=$(ls "$work"/dist/tbex-*.whl)
echo "test-wheel: $(basename "$wheel") ($(du -h "$wheel" | cut -f1))"

# A fresh venv: its dependencies come from the registry (or pip's cache), never the source tree.
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --disable-pip-version-check "$wheel" 2>"$work/pip.log" \
  || { cat "$work/pip.log"; exit 1; }
vpy="$work/venv/bin/python"
cd "$work"
mkdir scratch && cd scratch
export TBEX_CACHE_DIR="$work/cache" PYTHONNOUSERSITE=1

echo "test-wheel: seed example"
cp "$root/examples/tbe_doc_example.py" .
"$vpy" -c "import tbex, sys; assert '$root' not in tbex.__file__, tbex.__file__"
"$vpy" tbe_doc_example.py | tail -2

echo "test-wheel: tbexc"
"$work/venv/bin/tbexc" --help | head -1 | grep -q "^usage: tbexc"
prefix=$("$vpy" -c "import tbex; print(tbex.cmake_prefix_path)")
"$prefix/bin/tbexc" --op conv3d_backprop_filter --name k --out "$work/aot" \
  --x 1,4,1,8,8,16:float16 --out-backprop 1,4,1,8,8,16:float16 --filter-size 16,3,16,3,3 \
  --pads 1,1,1,1,1,1 | grep -q "k.a"
"$work/venv/bin/tbexc" --runtime-only --name rt --out "$work/aot" | grep -q "rt.a"

# cmake from the project's venv when it has one (make setup), else the one on PATH.
cmake=cmake
[[ -x "$root/.venv/bin/cmake" ]] && cmake="$root/.venv/bin/cmake"

build_aot_example() {  # $1: the venv's python
  local cmake_dir
  cmake_dir=$("$1" -m tbex --cmake-dir)
  rm -rf "$work/aot_cmake"
  "$cmake" -S "$root/examples/aot_cmake" -B "$work/aot_cmake" -DCMAKE_BUILD_TYPE=Release \
    -Dtbex_DIR="$cmake_dir" >/dev/null
  "$cmake" --build "$work/aot_cmake" -j"$jobs" >/dev/null
  "$work/aot_cmake/aot_cmake_example" | tail -1
}
echo "test-wheel: examples/aot_cmake against the installed CMake package"
build_aot_example "$vpy"

echo "test-wheel: examples/ascendc (Ascend C kernels) against the installed CMake package"
"$cmake" -S "$root/examples/ascendc" -B "$work/ascendc" -DCMAKE_BUILD_TYPE=Release \
  -Dtbex_DIR="$("$vpy" -m tbex --cmake-dir)" >/dev/null
"$cmake" --build "$work/ascendc" -j"$jobs" >/dev/null
env -u LD_LIBRARY_PATH "$work/ascendc/ascendc_example" | tail -1

echo "test-wheel: aclnn C example with gcc, no LD_LIBRARY_PATH"
gcc -std=c99 -O1 "$root/aclnn/examples/aclnn_c_example.c" -I"$prefix/include" -L"$prefix/lib" \
  -ltbex_aclnn -lm -Wl,-rpath,"$prefix/lib" -o aclnn_c_example
env -u LD_LIBRARY_PATH ./aclnn_c_example | tail -1

echo "test-wheel: the venv moved"
mv "$work/venv" "$work/moved"
"$work/moved/bin/python" -c "import tbex; print('import ok from', tbex.cmake_prefix_path)"
moved_pkg=$(echo "$work"/moved/lib/python3*/site-packages)
env -u LD_LIBRARY_PATH "$moved_pkg/tbex/bin/tbexc" --help | head -1
# libHalide is found through $ORIGIN, inside the moved venv (not the build's copy).
for bin in "$moved_pkg/tbex/bin/tbexc" "$moved_pkg"/tbex/lib/libtbex_aclnn.so \
           "$moved_pkg"/tbex/lib/libtbex_ascendc.so; do
  ldd "$bin" | grep libHalide | grep -q "$work/moved/" \
    || { echo "test-wheel: $bin does not find libHalide relative to itself:"; ldd "$bin"; exit 1; }
done
echo "test-wheel: OK"
