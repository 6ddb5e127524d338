"""The test-only libraries of requirements-dev.txt (transformers, torch, keras-hub, matplotlib):
a test that checks the project against one skips with a message where it is absent, except under
`CI=true`, where CI installed it and its absence is a failure, as for every other requirement."""
import importlib
import os

import pytest


def require(module: str):
    """Imports `module`; skips the test where it is absent, except under CI=true (then the
    ImportError fails the test)."""
    if os.environ.get("CI", "").lower() == "true":
        return importlib.import_module(module)
    return pytest.importorskip(
        module, reason=f"{module} is not installed (pip install -r requirements-dev.txt)")
