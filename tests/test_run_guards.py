"""Tests of training/run_guards.py: the output folder's lock and the stop on SIGTERM / SIGINT."""
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from training.run_guards import (LOCK_FILE, OutputDirInUseError, StopSignals,
                                 exclusive_output_dir)

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
                              cwd=os.path.dirname(os.path.dirname(__file__)))
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
