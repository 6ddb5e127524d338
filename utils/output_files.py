"""Writing output files atomically, and the original's `eval_results.txt` format.

Every file is written to a temporary file in the same folder and then renamed into place, so a
reader never sees half a file and an interrupted run leaves no file that looks complete.
"""
from __future__ import annotations

import os
import uuid
from typing import Mapping

import numpy as np


def write_text_atomically(path: str | os.PathLike, text: str) -> None:
    """Writes `text` (UTF-8) to `path` through a temporary file renamed into place."""
    path = os.fspath(path)
    # Same folder, so the rename is atomic; mode "x" keeps the usual (umask) permissions.
    temp_path = f"{path}.{os.getpid()}.{uuid.uuid4().hex}.tmp"
    try:
        with open(temp_path, "x", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.replace(temp_path, path)
    except BaseException as error:
        if os.path.exists(temp_path):
            os.unlink(temp_path)
        if isinstance(error, OSError) and not error.filename:
            # A failed write (full disk, file-size limit) names no file: name the output.
            raise OSError(error.errno, f"writing {path} failed: {error.strerror}") from None
        raise


def format_number(value: float | int | np.number) -> str:
    """Formats as the original's `str()` of TF's float32 / int64 outputs (`0.8431373`, `343`)."""
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    return str(np.float32(value))


def write_eval_results(path: str | os.PathLike, results: Mapping[str, float | int]) -> None:
    """Writes `eval_results.txt`: one `key = value` line per result, keys sorted, as the original.

    Args:
        path: Output file.
        results: metric name -> value (`global_step` an int).
    """
    lines = [f"{key} = {format_number(results[key])}\n" for key in sorted(results)]
    write_text_atomically(path, "".join(lines))
