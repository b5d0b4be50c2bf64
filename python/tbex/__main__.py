"""``python -m tbex aot ...`` (the tbexc command line) and ``python -m tbex cache
list|info|prune|clear`` (the on-disk kernel cache), ``python -m tbex machine`` (the host's
measured cost-model constants)."""
import os
import sys

USAGE = ("usage: python -m tbex aot [tbexc flags]      (python -m tbex aot --help for the flags)\n"
         "       python -m tbex cache list|info|prune|clear [--dir DIR] [--max-mb N]\n"
         "       python -m tbex knobs                    (every setting, its default and meaning)\n"
         "       python -m tbex machine [--remeasure]    (this CPU's measured rates, the cost model's inputs)\n"
         "       python -m tbex --cmake-dir              (where tbexConfig.cmake is: -Dtbex_DIR=...)\n")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] == "aot":
        from . import aot
        return aot.main(argv[1:])
    if argv and argv[0] == "cache":
        from . import cache
        return cache.main(argv[1:])
    if argv and argv[0] == "knobs":
        from . import knobs
        sys.stdout.write(knobs.describe())
        return 0
    if argv and argv[0] == "machine":
        if any(a != "--remeasure" for a in argv[1:]):
            sys.stderr.write(USAGE)
            return 2
        from . import machine
        sys.stdout.write(machine.describe(remeasure="--remeasure" in argv[1:]))
        return 0
    if argv and argv[0] == "--cmake-dir":
        from . import cmake_prefix_path
        sys.stdout.write(os.path.join(cmake_prefix_path, "lib", "cmake", "tbex") + "\n")
        return 0
    if argv and argv[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return 0
    sys.stderr.write(USAGE)
    return 2


def _run() -> int:
    try:
        rc = main()
        sys.stdout.flush()
        return rc
    except BrokenPipeError:
        # `python -m tbex cache list | head`: the reader left; exit quietly as CLI tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(_run())
