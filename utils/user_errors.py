"""A mistake of the user's ends a script with one line, `error: <message>`, not a traceback.

The project checks what it is given (flags, input files, models, output folders) and raises a
`ValueError` with a message that names what is wrong and where, or a `UserError` (an output
folder in use, a loss that diverged); the system raises an `OSError` (no such file, a full disk).
Those are the user's to fix: `report_user_errors` prints `error: <message>` on stderr and the
script exits with status 1. Anything else (another type, or a `ValueError` raised inside a
library the project calls) is a bug and keeps its traceback, as does every error under
`--verbose` or `BERT_TRACEBACK=1`.
"""
from __future__ import annotations

import functools
import os
import sys
from typing import Callable

TRACEBACK_VARIABLE = "BERT_TRACEBACK"
_PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class UserError(Exception):
    """A condition of the user's to fix that is neither bad input nor a missing file (an output
    folder another run holds, a training loss that diverged)."""


def raised_by_project(error: BaseException) -> bool:
    """Whether the innermost frame of `error`'s traceback is the project's code (not a library
    it calls, even one installed inside the project's folder)."""
    trace = error.__traceback__
    if trace is None:
        return False
    while trace.tb_next is not None:
        trace = trace.tb_next
    path = os.path.abspath(trace.tb_frame.f_code.co_filename)
    return path.startswith(_PROJECT_ROOT + os.sep) and "site-packages" not in path


def is_user_error(error: BaseException) -> bool:
    """A `UserError`, an `OSError` (the system refused: no such file, no space, no permission),
    or a `ValueError` the project's own code raised."""
    return isinstance(error, (UserError, OSError)) or (
        isinstance(error, ValueError) and raised_by_project(error))


def error_line(error: BaseException) -> str:
    """`error: <message>`; a message of several lines (a list of variables) keeps them."""
    return f"error: {str(error).strip() or type(error).__name__}"


def report_user_errors(main: Callable[[list[str]], object],
                       verbose: Callable[[], bool]) -> Callable[[list[str]], object]:
    """`main`, with a user error printed as `error_line` and turned into exit status 1.

    Args:
        main: the script's `main(argv)`.
        verbose: whether the user asked for tracebacks (read when an error is raised).
    """
    @functools.wraps(main)
    def reporting_main(argv: list[str]) -> object:
        try:
            return main(argv)
        except Exception as error:  # noqa: BLE001 - re-raised unless it is the user's to fix
            if not is_user_error(error) or verbose() or os.environ.get(TRACEBACK_VARIABLE):
                raise
            print(error_line(error), file=sys.stderr, flush=True)
            raise SystemExit(1) from None

    return reporting_main
