"""Reading a JSON file that must hold one object, with errors that name the file."""
from __future__ import annotations

import json
import os
from typing import Any


def read_json_object(path: str | os.PathLike, what: str = "") -> dict[str, Any]:
    """The JSON object of the file at `path`.

    Args:
        path: the file.
        what: what the file is (e.g. "BERT config"), said in errors.

    Raises:
        ValueError: the file cannot be read or parsed, or holds no JSON object; the message names
            the file.
    """
    try:
        with open(path, encoding="utf-8") as f:
            values = json.load(f)
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"cannot read {what + ' ' if what else ''}{path}: {error}") from None
    if not isinstance(values, dict):
        raise ValueError(f"{path}: {'a ' + what if what else 'the file'} must be a JSON object")
    return values
