"""Runs a script as `python SCRIPT ARGS...` would, sending it a signal the moment it starts an output.

    python -m tests.support.stop_while_writing SIGTERM 'eval_results.txt.*.tmp' run_classifier.py ARGS...

An audit hook watches the files the script opens for writing and the folders it creates; when the
first one whose name matches the pattern appears (an output's temporary file or folder), the
process sends itself the signal, as a scheduler or Ctrl-C would at that moment. What happens next
is the script's own doing.
"""
import fnmatch
import os
import runpy
import signal
import sys


def _is_write(event: str, args: tuple) -> bool:
    if event == "os.mkdir":
        return True
    if event != "open":
        return False
    mode, flags = args[1], args[2]
    if isinstance(mode, str):
        return any(c in mode for c in "wxa+")
    return bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))


def main() -> None:
    signal_name, pattern, script, *script_args = sys.argv[1:]
    signum = signal.Signals[signal_name]
    sent = False

    def hook(event: str, args: tuple) -> None:
        nonlocal sent
        if sent or event not in ("open", "os.mkdir") or not isinstance(args[0], (str, bytes)):
            return
        path = os.fsdecode(args[0])
        if fnmatch.fnmatch(os.path.basename(path), pattern) and _is_write(event, args):
            sent = True
            print(f"sending {signal_name} while writing {path}", file=sys.stderr, flush=True)
            os.kill(os.getpid(), signum)

    sys.addaudithook(hook)
    sys.argv = [script, *script_args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
