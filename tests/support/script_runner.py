"""Runs one script on many argument lists in one process: a TensorFlow start for the lot, not one
per run.

    python tests/support/script_runner.py SCRIPT.py CELLS.json RESULTS.json

`CELLS.json` is {cell: [argument, ...]}; `RESULTS.json` gets {cell: {"status", "stdout",
"stderr", "seconds"}}. Tests call `run_cells`.

Each cell runs as the script's `main` does from the shell (`python SCRIPT.py ARGUMENTS`, through
`utils.entry_point.run`): the absl flags are reset and parsed from the cell's arguments
(`FLAGS.unparse_flags(); FLAGS([script, *args])`), then `main` runs under
`utils.user_errors.report_user_errors`, which prints a user's mistake as one `error: ...` line
and exits with status 1. A flag error ends the cell as absl's `app.run` ends the script (a
`FATAL Flags parsing error` line, status 1); any other exception is a bug and prints its
traceback, as Python does, with status 1. File descriptors 1 and 2 point at the cell's own files
while it runs, so its stdout and stderr hold everything written there (print, absl logging,
TensorFlow's C++ messages).

What differs from a fresh process: the script module is imported once, so module state (caches
keyed by path) lives on between cells, and Keras' global state is cleared before each cell
(`keras.backend.clear_session()`); the stop-signal handlers and `--help` listing of
`entry_point.run` are left out. `tests/scripts/test_model_table_text.py` runs some cells both ways.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
import traceback

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_cells(script: str, cells: dict[str, list[str]], work_dir: str,
              timeout: float = 1200) -> dict[str, dict]:
    """Runs `script` (a file name at the repository root) once per cell, in one worker process.

    Args:
        script: e.g. "predict_text.py".
        cells: {cell name: the script's arguments}.
        work_dir: where the cell list and the results are written.

    Returns:
        {cell name: {"status": int, "stdout": str, "stderr": str, "seconds": float}}.
    """
    cells_file = os.path.join(work_dir, f"{script}.cells.json")
    results_file = os.path.join(work_dir, f"{script}.results.json")
    with open(cells_file, "w", encoding="utf-8") as f:
        json.dump(cells, f)
    done = subprocess.run([sys.executable, os.path.abspath(__file__), script, cells_file,
                           results_file], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, done.stderr[-5000:]
    with open(results_file, encoding="utf-8") as f:
        return json.load(f)


def _exit_status(code) -> int:
    """The status `sys.exit(code)` gives, printing a message code as Python does."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _run_main(script: str, main, arguments: list[str]) -> int:
    """One cell: flags reset and parsed, `main` under the script's error reporting; its status."""
    import keras
    from absl import flags
    from utils.user_errors import report_user_errors

    keras.backend.clear_session()
    flags.FLAGS.unparse_flags()
    try:
        argv = flags.FLAGS([script, *arguments])
    except flags.Error as error:
        print(f"FATAL Flags parsing error: {error}", file=sys.stderr)
        return 1
    try:
        report_user_errors(main, verbose=lambda: False)(argv)
        return 0
    except SystemExit as stop:
        return _exit_status(stop.code)
    except Exception:  # noqa: BLE001 - a bug: its traceback, as an uncaught exception prints it
        traceback.print_exc()
        return 1


def _captured(script: str, main, arguments: list[str], stem: str) -> dict:
    """Runs one cell with fds 1 and 2 in files; {"status", "stdout", "stderr", "seconds"}."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    start = time.monotonic()
    with open(stem + ".out", "wb") as out, open(stem + ".err", "wb") as err:
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        try:
            status = _run_main(script, main, arguments)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
    result = {"status": status, "seconds": time.monotonic() - start}
    for stream in ("out", "err"):
        with open(f"{stem}.{stream}", encoding="utf-8", errors="replace") as f:
            result[f"std{stream}"] = f.read()
    return result


def main(script: str, cells_file: str, results_file: str) -> None:
    sys.path.insert(0, REPO_ROOT)
    os.chdir(REPO_ROOT)
    from absl import logging
    logging.use_absl_handler()  # as absl's app.run does
    spec = importlib.util.spec_from_file_location(script[:-len(".py")],
                                                  os.path.join(REPO_ROOT, script))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with open(cells_file, encoding="utf-8") as f:
        cells = json.load(f)
    results = {}
    for number, (cell, arguments) in enumerate(cells.items()):
        results[cell] = _captured(script, module.main, arguments,
                                  f"{results_file}.{number}")
    with open(results_file, "w", encoding="utf-8") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main(*sys.argv[1:])
