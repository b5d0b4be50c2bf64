"""The on-disk kernel cache: list, summarise, prune and clear its entries.

Compiled kernels live under ``TBEX_CACHE_DIR`` (default ``$XDG_CACHE_HOME/tbex`` or
``~/.cache/tbex``) as ``<key[:2]>/<key>.so`` with a JSON sidecar ``<key>.json`` (problem,
schedule, size, sha256, created time); ``runtime/`` holds the Halide runtime object linked into
each of them. Past ``TBEX_CACHE_MAX_MB`` (default 1024) the least recently used entries are
evicted, never one a process has loaded. See the knobs table in ``tbex.knobs``.

    python -m tbex cache list     # one line per entry: key, problem, schedule, size, age, last use
    python -m tbex cache info     # directory, entry count, total size, size cap
    python -m tbex cache prune [--max-mb N]   # evict LRU entries down to N MiB (default: the cap)
    python -m tbex cache clear    # delete every entry
"""
import argparse
import fcntl
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
    """This process's disk-cache outcomes: hits, compiles, rebuilds, fallbacks, evictions."""
    return dict(_C.cache_stats())


def max_bytes() -> int:
    """The size cap, ``TBEX_CACHE_MAX_MB`` in bytes; 0 means no cap."""
    return _C.cache_max_bytes()


def prune(max_mb=None, root=None) -> dict:
    """Evicts entries, least recently used first, until they total at most ``max_mb`` MiB
    (default ``TBEX_CACHE_MAX_MB``; nothing is evicted when that is 0, i.e. no cap; an explicit
    0 evicts every entry not in use). Entries a process has loaded or is compiling are kept.
    Returns ``evicted``, ``evicted_bytes``, ``kept``, ``kept_bytes`` and ``in_use``."""
    if max_mb is None:
        cap = max_bytes() or 2**62  # no cap: nothing is evicted, the counts are still reported
    else:
        if max_mb < 0:
            raise ValueError(f"max_mb={max_mb} is negative")
        cap = int(max_mb * 1024 * 1024)
    return dict(_C.prune_cache(cap, root or ""))


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
        try:
            st = os.stat(so)
            size, used = st.st_size, st.st_mtime  # loads and builds set the mtime (LRU order)
        except OSError:
            size, used = 0, None
        e.update(path=so, size=size, used=used, valid=ok and size == e.get("so_size"))
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


def _unlink_unheld_lock(path):
    """Deletes a lock file nobody holds (taking it first); a held one is another process's
    compile in progress and stays."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    finally:
        os.close(fd)


# Temp files (``<name>.tmp.<pid>...``) older than this are leftovers of a process that died
# mid-compile; younger ones may belong to a compile in progress, which would lose them.
_STALE_TEMP_SECONDS = 3600


def _stale_temp(path) -> bool:
    try:
        return time.time() - os.stat(path).st_mtime > _STALE_TEMP_SECONDS
    except OSError:
        return False


def clear(root=None) -> int:
    """Deletes every entry (shared objects, sidecars, locks nobody holds, temp files left an hour
    ago or earlier) and the shared Halide runtime objects (``runtime/``); returns the number of
    entries deleted. Processes that already loaded a kernel keep running it; a compile in progress
    keeps its lock and temp files. An unwritable directory raises OSError."""
    root = root or cache_dir()
    n = len(list(_sidecars(root)))
    if not os.path.isdir(root):
        return 0
    for sub in os.listdir(root):
        d = os.path.join(root, sub)
        if not (len(sub) == 2 or sub == "runtime") or not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            path = os.path.join(d, name)
            if name.endswith(".lock"):
                _unlink_unheld_lock(path)  # a compile in progress keeps its lock
            elif name.endswith((".so", ".json", ".o")) or (".tmp." in name and _stale_temp(path)):
                try:
                    os.unlink(path)
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
    """``list``, ``info``, ``prune`` or ``clear``; returns the exit status."""
    ap = argparse.ArgumentParser(prog="python -m tbex cache", description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=["list", "info", "prune", "clear"])
    ap.add_argument("--dir", help="cache directory (default: TBEX_CACHE_DIR or ~/.cache/tbex)")
    ap.add_argument("--max-mb", type=float, default=None,
                    help="prune: size to prune to in MiB (default TBEX_CACHE_MAX_MB; 0 evicts "
                         "every entry not in use)")
    a = ap.parse_args(argv)
    root = a.dir or cache_dir()
    if a.command == "list":
        for e in entries(root):
            state = "" if e["valid"] else "  (invalid)"
            print(f"{e['key'][:16]}  {e.get('problem', '?')}  {e.get('schedule', '?')}  "
                  f"threads={e.get('threads', '?')}  {_human(e['size'])}  {_age(e.get('created'))}  "
                  f"used {_age(e.get('used'))} ago{state}")
    elif a.command == "info":
        i = info(root)
        print(f"dir      {i['dir']}")
        print(f"entries  {i['entries']}")
        print(f"size     {_human(i['bytes'])}")
        cap = max_bytes()
        print(f"cap      {_human(cap) if cap else 'none'} (TBEX_CACHE_MAX_MB)")
        print(f"enabled  {'yes' if enabled() else 'no (TBEX_CACHE=0)'}")
    elif a.command == "prune":
        if a.max_mb is not None and a.max_mb < 0:
            ap.error(f"--max-mb {a.max_mb:g} is negative")
        r = prune(a.max_mb, root)
        print(f"evicted {r['evicted']} entries ({_human(r['evicted_bytes'])}), kept {r['kept']} "
              f"({_human(r['kept_bytes'])}, {r['in_use']} in use) in {root}")
    else:
        try:
            print(f"cleared {clear(root)} entries from {root}")
        except OSError as e:
            print(f"python -m tbex cache: cannot clear {root}: {e.strerror} ({e.filename})",
                  file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
