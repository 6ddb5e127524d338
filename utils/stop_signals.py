"""SIGTERM and SIGINT end a script through Python's exception path, so no output is half-written.

Left to their defaults, SIGTERM ends the process where it stands: the temporary file or folder an
output was being written to stays behind. `raise_on_stop_signals` (which every script's
`utils.entry_point.run` calls) has both signals raise `Stopped` in the main thread instead, so
every `AtomicFile` and `atomic_output_folder` in progress removes its temporary data, outputs
already complete stay as they are, and the script exits with status 1 and a message naming the
signal. Training loops set their own handlers while they train (they finish the step and
checkpoint first, `training.run_guards.StopSignals`) and give these back.
"""
from __future__ import annotations

import signal
import sys
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Stopped(SystemExit):
    """Raised in the main thread by the first SIGTERM or SIGINT; its code is the message."""


def _raise_stopped(signum: int, frame) -> None:
    del frame
    name = signal.Signals(signum).name
    # Later signals must not cut the clean-up short.
    for other in STOP_SIGNALS:
        signal.signal(other, _report_ignored)
    raise Stopped(f"stopped by {name}: outputs being written were removed, outputs already "
                  "complete are kept; rerun the same command to make them")


def _report_ignored(signum: int, frame) -> None:
    del frame
    print(f"{signal.Signals(signum).name} received again: still removing what was being "
          "written", file=sys.stderr, flush=True)


def raise_on_stop_signals() -> None:
    """Makes the first SIGTERM or SIGINT raise `Stopped` (call from the main thread)."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, _raise_stopped)
