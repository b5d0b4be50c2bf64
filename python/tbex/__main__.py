"""``python -m tbex aot ...``: ahead-of-time kernels (the tbexc command line)."""
import sys

from . import aot

USAGE = "usage: python -m tbex aot [tbexc flags]   (python -m tbex aot --help for the flags)\n"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] == "aot":
        return aot.main(argv[1:])
    if argv and argv[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return 0
    sys.stderr.write(USAGE)
    return 2


if __name__ == "__main__":
    sys.exit(main())
