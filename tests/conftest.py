"""Shared test settings: where the golden files of the original code live.

`BERT_FIXTURES_DIR` (default `../shared/fixtures`) holds outputs of Google's original code;
`BERT_SHARED_DATA` (default `../shared/data`) holds real public data. Tests that need either skip
with a message where it is absent, except under CI (`CI=true`), where they fail instead.
"""
import os
import pathlib

import pytest

from tests.support.paths import REPO_ROOT


def _shared_path(env_var: str, default: str) -> pathlib.Path:
    path = pathlib.Path(os.environ.get(env_var, REPO_ROOT / default))
    if not path.is_dir():
        message = f"{env_var}={path} is not a directory"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + " (required under CI=true)")
        pytest.skip(message)
    return path


@pytest.fixture(scope="session")
def fixtures_dir() -> pathlib.Path:
    """Folder of the original code's outputs (`../shared/fixtures`)."""
    return _shared_path("BERT_FIXTURES_DIR", "../shared/fixtures")


@pytest.fixture(scope="session")
def shared_data_dir() -> pathlib.Path:
    """Folder of real public data (`../shared/data`)."""
    return _shared_path("BERT_SHARED_DATA", "../shared/data")


@pytest.fixture(scope="session")
def uncased_vocab(fixtures_dir) -> pathlib.Path:
    """The real BERT uncased vocab.txt."""
    return fixtures_dir / "vocab" / "uncased_vocab.txt"
