"""The one exception type the CLI turns into a one-line ``Error: ...``."""


class ProbeError(Exception):
    """Bad input or an unusable file; the message is shown to the user as is."""
