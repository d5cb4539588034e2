"""The ways a command ends early, which the CLI maps to exit statuses."""

import signal


class UsageError(Exception):
    """Bad input: one line on stderr, exit status 2, nothing measured or stored."""


class MeasurementError(Exception):
    """The measurement ran but failed: exit status 1, the run kept as failed."""


class Interrupted(BaseException):
    """A signal asked us to stop: exit status 128+N, and the run, if one had
    begun, kept as incomplete (run_kept, its id run_id). Not an Exception, as
    KeyboardInterrupt is not: code that carries on past a failure (a
    collector that cannot read something) must not carry on past a stop."""

    def __init__(self, signum: int):
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum
        self.run_kept = False
        self.run_id: int | None = None
