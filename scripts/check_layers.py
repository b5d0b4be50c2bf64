#!/usr/bin/env python3
"""Fails on an #include that points upward in tbex's layers (docs/data_flow.md).

Every C/C++ file of the product belongs to a layer by its path; every quoted #include is resolved
the way the build resolves it (the file's own directory, then the include roots); an include of a
file in a higher layer is an error. Public headers (compiler/include/tbex) belong to the layer
that implements them. The build enforces the same order (each layer's CMake target sees only its
own and lower include directories); this check names the line.

usage: check_layers.py [REPO]   (exit 1 and one line per upward include, else 0)
"""
import re
import sys
from pathlib import Path

LAYERS = ["runtime", "support", "frontend", "ops", "schedules", "lower", "codegen", "tune",
          "api", "top"]

# Directory prefix -> layer, longest prefix first.
DIRS = {
    "runtime/": "runtime",
    "compiler/src/support/": "support",
    "compiler/src/frontend/": "frontend",
    "compiler/src/ops/": "ops",
    "schedules/": "schedules",
    "compiler/src/lower/": "lower",
    "compiler/src/codegen/": "codegen",
    "compiler/src/tune/": "tune",
    "compiler/src/api/": "api",
    "compiler/tools/": "top",
    "python/src/": "top",
    "aclnn/": "top",
    "ascendc/": "top",
    "examples/": "top",
}

# Public headers: the layer that defines what they declare.
PUBLIC = {
    "problem.h": "frontend",
    "select.h": "lower",
    "kernel.h": "codegen",
    "cache.h": "codegen",
    "aot.h": "codegen",
    "tune.h": "tune",
    "conv_backward.h": "api",
    "tbex.h": "api",
}

ROOTS = ["compiler/src", ".", "compiler/include", "runtime/include", "ascendc/include"]
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)


def layer_of(rel: str):
    if rel.startswith("compiler/include/tbex/"):
        return PUBLIC.get(rel.rsplit("/", 1)[1], "top")
    for prefix, layer in sorted(DIRS.items(), key=lambda kv: -len(kv[0])):
        if rel.startswith(prefix):
            return layer
    return None


def resolve(repo: Path, src: Path, name: str):
    for base in [src.parent] + [repo / r for r in ROOTS]:
        cand = (base / name).resolve()
        if cand.is_file() and repo.resolve() in cand.parents:
            return cand.relative_to(repo.resolve()).as_posix()
    return None  # a system or third-party header (Halide.h, gtest, ...)


def check(repo: Path):
    errors = []
    for src in sorted(repo.rglob("*")):
        if src.suffix not in (".h", ".hpp", ".cpp", ".cc", ".c") or not src.is_file():
            continue
        rel = src.relative_to(repo).as_posix()
        if rel.startswith(("build/", ".venv/", ".git/")):
            continue
        mine = layer_of(rel)
        if mine is None:
            continue  # tests, bench, examples: consumers of every layer
        text = src.read_text(errors="replace")
        for m in INCLUDE.finditer(text):
            target = resolve(repo, src, m.group(1))
            theirs = layer_of(target) if target else None
            if theirs and LAYERS.index(theirs) > LAYERS.index(mine):
                line = text.count("\n", 0, m.start()) + 1
                errors.append(f"{rel}:{line}: {mine} includes \"{m.group(1)}\" ({target}, layer "
                              f"{theirs}): layers only include their own and lower ones "
                              f"({' -> '.join(LAYERS[:-1])})")
    return errors


def main(argv):
    repo = Path(argv[1] if len(argv) > 1 else Path(__file__).resolve().parent.parent)
    errors = check(repo)
    for e in errors:
        print(e)
    if errors:
        print(f"check_layers: {len(errors)} upward include(s)")
        return 1
    print("check_layers: every include points to its own or a lower layer")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
