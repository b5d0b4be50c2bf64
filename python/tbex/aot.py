"""Ahead-of-time kernels from Python: ``python -m tbex aot ...`` is tbexc (same flags, same
errors, exit status 2 for a bad argument), and ``dsl.build(sch, {"output_dir": d})`` writes the
same artefacts into ``d/kernel_meta/``.

A program links ``NAME.a`` + a Halide runtime (:func:`emit_runtime`, or ``tbexc --runtime-only``)
+ :func:`runtime_library` (tbex's thread pool) with ``-lpthread -ldl``, and includes ``NAME.h``.
"""
from __future__ import annotations

import os
import sys

from . import _C

__all__ = ["main", "tbexc_main", "emit", "emit_runtime", "runtime_library", "include_dir", "DEFAULT_EMIT"]

DEFAULT_EMIT = ("static_library", "header")


def main(argv, prog="python -m tbex aot") -> int:
    """Runs tbexc's command line (argv without the program name); returns its exit status."""
    rc, out, err = _C.aot_main([str(a) for a in argv], prog)
    sys.stdout.write(out)
    sys.stderr.write(err)
    return rc


def tbexc_main() -> int:
    """The ``tbexc`` console script of the wheel: tbexc's command line, in this process."""
    return main(sys.argv[1:], prog="tbexc")


def emit(problem, name: str, out_dir: str, emit=DEFAULT_EMIT, target: str = "host",
         schedule: str = "auto", variant: str = "") -> list:
    """Writes kernel ``name`` for ``problem`` (a dsl result's ``.problem``) and
    ``name.manifest.json`` into ``out_dir``; returns the paths written. The schedule and tile
    variant are decided as for the JIT (``"auto"``: tuning database, else the cost model)."""
    return _C.emit_aot(problem, name, os.fspath(out_dir), list(emit), target, schedule, variant)


def emit_runtime(name: str, out_dir: str, target: str = "host") -> list:
    """Writes the Halide runtime the kernels share (``name.a``, ``name.o``, manifest)."""
    return _C.emit_aot_runtime(name, os.fspath(out_dir), target)


def _package_file(*parts) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), *parts)


def runtime_library() -> str:
    """Path of ``libtbex_runtime.a`` shipped with the package."""
    return _package_file("lib", "libtbex_runtime.a")


def include_dir() -> str:
    """Directory holding ``tbex/aot_runtime.h`` (thread control for AOT kernels)."""
    return _package_file("include")
