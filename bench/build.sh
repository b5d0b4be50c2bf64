#!/usr/bin/env bash
# Builds the benchmark helpers into bench/build/:
#   build/onednn_bench   oneDNN conv3d backward timing (see onednn_bench.cpp)
#   build/peak           FP32 FMA peak (see peak.cpp)
#
# Which oneDNN:
#   1. $ONEDNN_ROOT (with include/ and lib/) if set;
#   2. else the venv's oneDNN (PyPI onednn-devel, in $VENV/include, $VENV/lib) if it can create a
#      CPU engine. The 2026.x PyPI build is the DPC++ one (CPU engine = SYCL CPU device, TBB
#      threading); without a SYCL CPU device (the OpenCL adapter of the Unified Runtime is not
#      shipped on PyPI) it cannot create a CPU engine, and then
#   3. PyPI's onednn-cpu-gomp + onednn-devel-cpu-gomp (oneDNN 3.2, OpenMP runtime, threads from
#      OMP_NUM_THREADS), downloaded with pip into build/onednn-cpu-gomp/ (once).
# Writes build/onednn_root.txt with the oneDNN used.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BUILD="$HERE/build"
VENV="${VENV:-$(cd "$HERE/.." && pwd)/.venv}"
PY="${PYTHON:-$VENV/bin/python}"
CXX="${CXX:-g++}"
mkdir -p "$BUILD"

echo "[build.sh] peak" >&2
"$CXX" -O2 -mavx512f -mfma -pthread "$HERE/peak.cpp" -o "$BUILD/peak"

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

fetch_gomp() {  # oneDNN CPU build with GNU OpenMP, from PyPI wheels
    local dst="$BUILD/onednn-cpu-gomp"
    if [ ! -f "$dst/include/oneapi/dnnl/dnnl.hpp" ] || ! ls "$dst"/lib/libdnnl.so* >/dev/null 2>&1; then
        echo "[build.sh] fetching onednn-cpu-gomp wheels from PyPI" >&2
        mkdir -p "$BUILD/wheels"
        "$PY" -m pip download --no-deps -q -d "$BUILD/wheels" \
            "onednn-cpu-gomp==2023.2.0" "onednn-devel-cpu-gomp==2023.2.0"
        "$PY" - "$BUILD/wheels" "$dst" <<'EOF'
import glob, os, sys, zipfile
src, dst = sys.argv[1], sys.argv[2]
for w in glob.glob(os.path.join(src, "onednn*cpu_gomp-*.whl")):
    with zipfile.ZipFile(w) as z:
        for info in z.infolist():
            name = info.filename
            if ".data/data/" not in name or name.endswith("/"):
                continue
            out = os.path.join(dst, name.split(".data/data/", 1)[1])
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with open(out, "wb") as f:
                f.write(z.read(info))
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                os.chmod(out, mode)
EOF
    fi
    echo "$dst"
}

if [ -n "${ONEDNN_ROOT:-}" ]; then
    try_root "$ONEDNN_ROOT" || { echo "[build.sh] ONEDNN_ROOT=$ONEDNN_ROOT unusable" >&2; exit 1; }
elif try_root "$VENV"; then
    :
else
    try_root "$(fetch_gomp)" || { echo "[build.sh] no usable oneDNN" >&2; exit 1; }
fi
