#!/usr/bin/env bash
# Builds the benchmark helpers into bench/build/:
#   build/onednn_bench   oneDNN conv3d backward timing (see onednn_bench.cpp)
#   build/peak           FP32 FMA peak (see peak.cpp)
#
# Which oneDNN: $ONEDNN_ROOT (with include/ and lib/) if set, else the venv's, installed by
# scripts/setup.sh from deps/pins.txt (onednn-cpu-gomp 3.2: PyPI's newer onednn-devel 2026.x is
# the SYCL build, which finds no CPU engine on these machines).
# Writes build/onednn_root.txt with the oneDNN used.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BUILD="$HERE/build"
VENV="${VENV:-$(cd "$HERE/.." && pwd)/.venv}"
PY="${PYTHON:-$VENV/bin/python}"
CXX="${CXX:-g++}"
mkdir -p "$BUILD"

echo "[build.sh] peak" >&2
"$CXX" -O2 -pthread "$HERE/peak.cpp" -o "$BUILD/peak"

compile_bench() {  # $1 = oneDNN root, $2 = output
    # --disable-new-dtags: DT_RPATH also applies to libdnnl's own dependencies (tbb, sycl, ...).
    "$CXX" -std=c++17 -O2 -I"$1/include" "$HERE/onednn_bench.cpp" -L"$1/lib" -ldnnl \
        -Wl,--disable-new-dtags,-rpath,"$1/lib" -o "$2"
}

try_root() {  # $1 = oneDNN root; succeeds if it builds and can create a CPU engine
    [ -f "$1/include/oneapi/dnnl/dnnl.hpp" ] || return 1
    ls "$1"/lib/libdnnl.so* >/dev/null 2>&1 || return 1
    echo "[build.sh] trying oneDNN in $1" >&2
    compile_bench "$1" "$BUILD/onednn_bench.try" || return 1
    if "$BUILD/onednn_bench.try" --info >"$BUILD/onednn_info.try" 2>/dev/null; then
        mv "$BUILD/onednn_bench.try" "$BUILD/onednn_bench"
        mv "$BUILD/onednn_info.try" "$BUILD/onednn_info.json"
        echo "$1" >"$BUILD/onednn_root.txt"
        echo "[build.sh] using oneDNN in $1: $(cat "$BUILD/onednn_info.json")" >&2
        return 0
    fi
    echo "[build.sh] oneDNN in $1 has no usable CPU engine: $(cat "$BUILD/onednn_info.try" 2>/dev/null)" >&2
    rm -f "$BUILD/onednn_bench.try" "$BUILD/onednn_info.try"
    return 1
}

if [ -n "${ONEDNN_ROOT:-}" ]; then
    try_root "$ONEDNN_ROOT" || { echo "[build.sh] ONEDNN_ROOT=$ONEDNN_ROOT unusable" >&2; exit 1; }
elif try_root "$VENV"; then
    :
else
    echo "[build.sh] no usable oneDNN: run scripts/setup.sh (deps/pins.txt pins it)" >&2; exit 1
fi
