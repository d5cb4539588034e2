"""The two ways a command fails, which the CLI maps to exit statuses."""


class UsageError(Exception):
    """Bad input: one line on stderr, exit status 2, nothing measured or stored."""


class MeasurementError(Exception):
    """The measurement ran but failed: exit status 1, the run kept as failed."""
