"""What keeps a training run safe beside others: one run per output folder, and a clean stop.

`exclusive_output_dir` holds an advisory lock on `OUTPUT_DIR/.training.lock` while a run trains,
so a second run pointed at the same folder refuses instead of writing checkpoints beside the
first. The kernel drops the lock when its process ends, however it ends (SIGKILL included), so a
killed run never leaves it stale. `StopSignals` turns SIGTERM (what schedulers and preemptible
VMs send) and SIGINT (Ctrl-C) into a request that the training loop honours after the current
step: it saves a checkpoint and raises `TrainingInterrupted`.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import threading
from typing import Iterator

from absl import logging

from utils.user_errors import UserError

LOCK_FILE = ".training.lock"
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class OutputDirInUseError(UserError, RuntimeError):
    """Another training run holds the output folder."""


class TrainingInterrupted(SystemExit):
    """Training stopped on SIGTERM or SIGINT after saving a checkpoint.

    A `SystemExit` whose code is the message: a script stops with it printed and status 1, no
    traceback. Rerunning the same command resumes from the checkpoint.
    """


@contextlib.contextmanager
def exclusive_output_dir(output_dir: str) -> Iterator[None]:
    """Holds the output folder's lock for the duration; raises OutputDirInUseError if taken.

    Remote folders (`gs://...`) are not locked: advisory locks exist only on local file systems.
    """
    if "://" in output_dir:
        yield
        return
    os.makedirs(output_dir, exist_ok=True)
    path = os.path.join(output_dir, LOCK_FILE)
    with open(path, "a+", encoding="utf-8") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            owner = lock.read().strip() or "another process"
            raise OutputDirInUseError(
                f"--output_dir={output_dir} is in use by another training run ({owner}, holding "
                f"{path}); wait for it to end or choose another --output_dir") from None
        lock.truncate(0)
        lock.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
        lock.flush()
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


class StopSignals:
    """Records SIGTERM / SIGINT while active instead of letting them end the process mid-step.

    `received` is the first signal's number, or None. A second signal is recorded too, so that a
    checkpoint being written is never cut short. Outside the main thread (where Python cannot set
    handlers) it does nothing.
    """

    def __init__(self):
        self.received: int | None = None
        self._previous: dict[int, object] = {}

    def _handle(self, signum, frame) -> None:
        del frame
        name = signal.Signals(signum).name
        if self.received is None:
            logging.warning("%s received: stopping after the current step with a checkpoint",
                            name)
        else:
            logging.warning("%s received again: still writing the checkpoint", name)
        self.received = self.received or signum

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self._handle) for s in _STOP_SIGNALS}
        return self

    def __exit__(self, *exc_info) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    @contextlib.contextmanager
    def suspended(self) -> Iterator[None]:
        """Inside the block the signals do what they did before `__enter__` (work between steps
        that a checkpoint already covers, such as scoring dev, ends at once)."""
        installed = {signum: signal.getsignal(signum) for signum in self._previous}
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        try:
            yield
        finally:
            for signum, handler in installed.items():
                signal.signal(signum, handler)
