"""Error types of the public API."""


class UserError(ValueError):
    """Bad input: a shape, dtype, parameter or group setting tbex cannot accept.

    ``code`` is the TBE error code when TBE has one (e.g. ``"E60038"``), else ``""``;
    ``param`` names the argument at fault.
    """

    def __init__(self, message, code="", param=""):
        super().__init__(message)
        self.code = code
        self.param = param


class PerformanceWarning(UserWarning):
    """A call takes a slower path than it would with other arguments (a strided input copied to
    dense memory, ...). Given once per process and cause; the message names the argument and
    what avoids it."""


class CacheWarning(UserWarning):
    """The on-disk kernel cache could not be used (unwritable or full directory, no C++ compiler,
    ...): kernels are compiled in memory, and again in every process. Given once per process;
    the message names the reason and the knobs (``TBEX_CACHE_DIR``, ``TBEX_CACHE=0``)."""
