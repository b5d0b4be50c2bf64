"""tbex's knobs: every setting, in one table.

=========================  ===========================================  =======================
environment variable       meaning                                      programmatic setter
=========================  ===========================================  =======================
``TBEX_NUM_THREADS``       worker threads of compiled kernels            ``tbex.set_num_threads``
                           (default: all cores)
``TBEX_LOG``               comma-separated log topics printed to         (environment only)
                           stderr: ``dispatch`` (which schedule each
                           kernel uses, why the others do not apply,
                           the cost model's ranking),
                           ``lower`` (stage times), ``conv`` (time of
                           each step of convolution_backward: packing,
                           kernels, unpacking), ``cache`` (disk-cache
                           hits, misses, rebuilds, with timings),
                           ``tune`` (every candidate the measured
                           tuning times, the winner, the database
                           write; a corrupt database is reported
                           whatever the setting), ``all``
``TBEX_DUMP_DIR``          write each compiled kernel's lowered Halide   (environment only)
                           loop nest to ``DIR/<problem>.<schedule>.stmt``
``TBEX_CACHE_DIR``         on-disk kernel cache: compiled kernels are    ``python -m tbex.cache``
                           shared objects under this directory, reused   ``list|info|clear``
                           across processes (default
                           ``$XDG_CACHE_HOME/tbex``, else
                           ``~/.cache/tbex``)
``TBEX_CACHE``             ``0`` turns the disk cache off (kernels are   (environment only)
                           compiled in memory, nothing is written)
``TBEX_ALWAYS_COMPILE``    ``1`` ignores existing cache entries:         (environment only)
                           every kernel is recompiled and its entry
                           overwritten
``TBEX_CC``                C compiler tbexc / ``python -m tbex aot``      (environment only)
                           use for the kernel wrapper of a static
                           library or object (default ``$CC``, else
                           ``cc``)
``TBEX_HALIDE_INCLUDE_DIR``  where that compile finds                   (environment only)
                           ``HalideRuntime.h`` (default: the Halide
                           wheel tbex was built against)
``TBEX_DW_TILE``,          override the register tile of ``dw_tiled``    (environment only)
``TBEX_DX_TILE``,          (``nt,kwt,ch``) / ``dx_tiled`` (``qt,ct``) /
``TBEX_FWD_TILE``          ``fwd_tiled`` (``qt,ct``), for tiling
                           experiments; only where no tile variant is
                           given (a variant or a tuning database entry
                           wins)
``TBEX_TUNE``              ``1``: every ``"auto"`` compile of a problem  ``dsl.auto_schedule(res,
                           without a tuning database entry tunes it      tune=True)``
                           first (times each applicable schedule and
                           tile variant, stores the fastest)
``TBEX_TUNING_DB``         the tuning database file (default             (environment only)
                           ``<cache dir>/tuning.json``); entries keyed
                           by problem, thread count, target and tbex
                           version, consulted by every ``"auto"``
                           compile
=========================  ===========================================  =======================

``threads(n)`` is a scoped override: ``with tbex.knobs.threads(1): ...``.
"""
import contextlib

from . import _C


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
