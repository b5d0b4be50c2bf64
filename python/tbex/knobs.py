"""tbex's knobs: every setting in one registry, the C++ one (``runtime/src/knobs.cpp``).

This module reads the registry from ``_C`` instead of keeping a copy, so the table below, the
values C++ sees and the kernel cache keys (the knobs marked ``codegen``) cannot disagree.
A value comes from a programmatic override (:func:`set`, :func:`override`), else the
environment, else the default. ``python -m tbex knobs`` prints the table.

``threads(n)`` and ``override(name, value)`` are scoped: ``with tbex.knobs.threads(1): ...``.
"""
import contextlib
import textwrap

from . import _C

__all__ = ["table", "get", "set", "unset", "override", "describe", "set_num_threads",
           "num_threads", "threads", "kernel_cache_stats", "plan_cache_stats", "log_topics"]


def table() -> list:
    """The registry: [{"name", "kind", "default", "doc", "setter", "affects_codegen"}]."""
    return _C.knobs()


def _check(name: str) -> None:
    if name not in {k["name"] for k in table()}:
        from .errors import UserError
        raise UserError(f"name: unknown knob {name!r} (known: "
                        f"{', '.join(k['name'] for k in table())})", "E60000", "name")


def get(name: str) -> str:
    """The knob's value as text (override, else environment, else default)."""
    _check(name)
    return _C.knob_get(name)


def set(name: str, value) -> None:  # noqa: A001 - the registry's verb
    """Overrides the environment for this process."""
    _check(name)
    _C.knob_set(name, str(value))


def unset(name: str) -> None:
    """Removes an override (the environment or the default applies again)."""
    _check(name)
    _C.knob_unset(name)


@contextlib.contextmanager
def override(name: str, value):
    """Runs the body with knob ``name`` set to ``value``, restoring the previous state after."""
    _check(name)
    had = _C.knob_is_set(name)
    old = _C.knob_get(name)
    set(name, value)
    try:
        yield
    finally:
        # An environment value comes back by itself once the override is gone.
        unset(name)
        if had and _C.knob_get(name) != old:
            set(name, old)


def log_topics() -> list:
    """[(topic, what it prints)] for TBEX_LOG."""
    return list(_C.log_topics())


def describe(width: int = 100) -> str:
    """The knobs table as text: name, kind, default, meaning, setter."""
    lines = []
    for k in table():
        head = f"{k['name']} ({k['kind']}, default {k['default'] or 'unset'}"
        head += ", part of kernel cache keys)" if k["affects_codegen"] else ")"
        lines.append(head)
        body = k["doc"] + (f". Also: {k['setter']}" if k["setter"] else "")
        lines += textwrap.wrap(body, width, initial_indent="    ", subsequent_indent="    ")
        if k["name"] == "TBEX_LOG":
            lines += [f"    {t:<9} {d}" for t, d in log_topics()]
    return "\n".join(lines) + "\n"


def set_num_threads(n: int) -> None:
    """Worker threads used by kernels (0 = all cores)."""
    _C.set_num_threads(int(n))


def num_threads() -> int:
    return _C.num_threads()


@contextlib.contextmanager
def threads(n: int):
    """Runs the body with ``n`` kernel threads, restoring the previous count after."""
    old = num_threads()
    set_num_threads(n)
    try:
        yield
    finally:
        set_num_threads(old)


def kernel_cache_stats() -> dict:
    """This process's in-memory kernel cache: hits, misses, evictions, size, capacity
    (TBEX_KERNEL_CACHE_CAPACITY)."""
    return _C.kernel_cache_stats()


def plan_cache_stats() -> dict:
    """``convolution_backward``'s plan cache: the same policy and capacity as the kernel cache."""
    return _C.conv_plan_cache_stats()
