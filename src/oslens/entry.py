"""The `oslens` command's first moments. Importing the CLI (click, rich,
the kinds) takes a good part of a second; a stop signal in that time would
otherwise end in a KeyboardInterrupt traceback, or, for SIGTERM and SIGHUP,
without a word. Nothing has been made yet, so it ends the command at once,
worded and with the status of any other interruption. This module imports
nothing heavy: it is what runs first."""

from __future__ import annotations

import os

from . import stopsignals
from .errors import Interrupted


def _while_starting(signum, frame) -> None:
    os.write(2, f"oslens: {Interrupted(signum)}\n".encode())
    os._exit(128 + signum)


def main() -> None:
    stopsignals.install(dict.fromkeys(stopsignals.STOP_SIGNALS, _while_starting))
    from .cli import main as cli_main  # it puts its own handlers in place of these first thing

    cli_main()
