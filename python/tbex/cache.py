"""The on-disk kernel cache: list, summarise and clear its entries.

Compiled kernels live under ``TBEX_CACHE_DIR`` (default ``$XDG_CACHE_HOME/tbex`` or
``~/.cache/tbex``) as ``<key[:2]>/<key>.so`` with a JSON sidecar ``<key>.json`` (problem,
schedule, size, sha256, created time); ``runtime/`` holds the Halide runtime object linked into
each of them. See the knobs table in ``tbex.knobs``.

    python -m tbex.cache list     # one line per entry: key, problem, schedule, size, age
    python -m tbex.cache info     # directory, entry count, total size
    python -m tbex.cache clear    # delete every entry
"""
import argparse
import json
import os
import sys
import time

from . import _C


def cache_dir() -> str:
    """The directory in use (same resolution as the compiler's)."""
    return _C.cache_dir()


def enabled() -> bool:
    """False when ``TBEX_CACHE=0``."""
    return _C.cache_enabled()


def stats() -> dict:
    """This process's disk-cache outcomes: hits, compiles, rebuilds, fallbacks."""
    return dict(_C.cache_stats())


def _sidecars(root):
    if not os.path.isdir(root):
        return
    for sub in sorted(os.listdir(root)):
        d = os.path.join(root, sub)
        if len(sub) != 2 or not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            if name.endswith(".json") and len(name) == 64 + 5:
                yield os.path.join(d, name)


def entries(root=None) -> list:
    """Every entry as a dict (the sidecar's fields plus ``path``, ``size``, ``valid``); an entry
    whose sidecar is unreadable or whose .so is missing is listed with ``valid`` False."""
    root = root or cache_dir()
    out = []
    for side in _sidecars(root):
        so = side[:-5] + ".so"
        try:
            with open(side) as f:
                e = json.load(f)
            ok = isinstance(e, dict) and "key" in e
        except (OSError, ValueError):
            e, ok = {}, False
        if not ok:
            e = {"key": os.path.basename(side)[:-5]}
        size = os.path.getsize(so) if os.path.exists(so) else 0
        e.update(path=so, size=size, valid=ok and size == e.get("so_size"))
        out.append(e)
    return out


def info(root=None) -> dict:
    """``dir``, ``entries`` (count) and ``bytes`` (all files of the cache, sidecars and locks
    included)."""
    root = root or cache_dir()
    total = 0
    for dirpath, _, files in os.walk(root):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(dirpath, name))
            except OSError:
                pass
    return {"dir": root, "entries": len(entries(root)), "bytes": total}


def clear(root=None) -> int:
    """Deletes every entry (shared objects, sidecars, locks, leftover temp files) and the shared
    Halide runtime objects (``runtime/``); returns the number of entries deleted. Processes that
    already loaded a kernel keep running it."""
    root = root or cache_dir()
    n = len(list(_sidecars(root)))
    if not os.path.isdir(root):
        return 0
    for sub in os.listdir(root):
        d = os.path.join(root, sub)
        if not (len(sub) == 2 or sub == "runtime") or not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            if name.endswith((".so", ".json", ".lock", ".o")) or ".tmp." in name:
                try:
                    os.unlink(os.path.join(d, name))
                except FileNotFoundError:
                    pass
        try:
            os.rmdir(d)
        except OSError:
            pass
    return n


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def _age(created) -> str:
    if not isinstance(created, (int, float)):
        return "?"
    s = max(0.0, time.time() - created)
    for unit, div in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= div:
            return f"{s / div:.0f}{unit}"
    return f"{s:.0f}s"


def main(argv=None) -> int:
    """``list``, ``info`` or ``clear``; returns the exit status."""
    ap = argparse.ArgumentParser(prog="python -m tbex.cache", description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=["list", "info", "clear"])
    ap.add_argument("--dir", help="cache directory (default: TBEX_CACHE_DIR or ~/.cache/tbex)")
    a = ap.parse_args(argv)
    root = a.dir or cache_dir()
    if a.command == "list":
        for e in entries(root):
            state = "" if e["valid"] else "  (invalid)"
            print(f"{e['key'][:16]}  {e.get('problem', '?')}  {e.get('schedule', '?')}  "
                  f"threads={e.get('threads', '?')}  {_human(e['size'])}  {_age(e.get('created'))}{state}")
    elif a.command == "info":
        i = info(root)
        print(f"dir      {i['dir']}")
        print(f"entries  {i['entries']}")
        print(f"size     {_human(i['bytes'])}")
        print(f"enabled  {'yes' if enabled() else 'no (TBEX_CACHE=0)'}")
    else:
        print(f"cleared {clear(root)} entries from {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
