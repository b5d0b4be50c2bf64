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
