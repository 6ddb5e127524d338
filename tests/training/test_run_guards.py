"""Tests of training/run_guards.py (the output folder's lock, the stop on SIGTERM / SIGINT while
training) and utils/stop_signals.py (the same signals anywhere else in a script)."""
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from tests.support.paths import REPO_ROOT
from training.run_guards import (LOCK_FILE, OutputDirInUseError, StopSignals,
                                 exclusive_output_dir)
from utils import stop_signals

_HOLDER = textwrap.dedent("""
    import sys, time
    from training.run_guards import exclusive_output_dir
    with exclusive_output_dir(sys.argv[1]):
        print("locked", flush=True)
        time.sleep(60)
""")


def test_a_second_run_is_refused_while_the_first_holds_the_folder_and_not_after_its_death(
        tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(tmp_path)],
                              stdout=subprocess.PIPE, text=True,
                              cwd=REPO_ROOT)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(OutputDirInUseError, match=f"pid {holder.pid} on "):
            with exclusive_output_dir(str(tmp_path)):
                pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # The killed holder left its lock file, but not its lock.
    assert (tmp_path / LOCK_FILE).exists()
    with exclusive_output_dir(str(tmp_path)):
        assert f"pid {os.getpid()}" in (tmp_path / LOCK_FILE).read_text()


def test_stop_signals_are_recorded_then_the_previous_handlers_come_back():
    before = signal.getsignal(signal.SIGTERM)
    with StopSignals() as stop:
        assert stop.received is None
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.received == signal.SIGTERM  # the first one is kept
    assert signal.getsignal(signal.SIGTERM) is before


def test_the_first_stop_signal_raises_and_a_second_does_not_cut_the_clean_up_short(capfd):
    previous = {s: signal.getsignal(s) for s in stop_signals.STOP_SIGNALS}
    try:
        stop_signals.raise_on_stop_signals()
        cleaned_up = False
        with pytest.raises(stop_signals.Stopped, match="stopped by SIGTERM") as stopped:
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                signal.pause()  # not reached: the handler raises first
            finally:
                os.kill(os.getpid(), signal.SIGINT)  # during the clean-up: reported only
                cleaned_up = True
        assert cleaned_up and stopped.value.code.startswith("stopped by SIGTERM")
        assert "SIGINT received again" in capfd.readouterr().err
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
