"""The layers of docs/architecture.md, one direction: each library package imports only what is
below it."""
import ast
import pathlib

import pytest

from tests.support.paths import REPO_ROOT

PROJECT = ("utils", "data", "modeling", "running", "training", "tasks", "serving", "synthetic",
           "selection")
# What each package may import besides itself (scripts, bench/ and tests/ never).
ALLOWED = {
    "utils": set(),
    "data": {"utils"},
    "modeling": {"utils"},
    # Batching and prediction, shared by training and the tasks.
    "running": {"modeling", "utils"},
    "training": {"modeling", "running", "utils"},
    # One module per task, above the four it connects.
    "tasks": {"data", "modeling", "running", "training", "utils"},
    # Serving exports the tasks' models with tokenization in the graph.
    "serving": {"tasks", "data", "modeling", "running", "utils"},
    "synthetic": {"data", "utils"},
    # The grid of fine-tuning runs select_fine_tuning.py runs, above the classifier task.
    "selection": {"tasks", "data", "utils"},
}
SCRIPTS = {path.stem for path in pathlib.Path(REPO_ROOT).glob("*.py")}


def imported_top_levels(path: pathlib.Path) -> set[str]:
    """The first name of every module `path` imports, at any depth of the file."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", PROJECT)
def test_package_imports_only_the_layers_below_it(package):
    root = pathlib.Path(REPO_ROOT)
    files = sorted((root / package).rglob("*.py"))
    assert files, f"no package {package}/"
    forbidden = (set(PROJECT) | SCRIPTS | {"bench", "tests"}) - ALLOWED[package] - {package}
    breaks = {str(path.relative_to(root)): sorted(imported_top_levels(path) & forbidden)
              for path in files}
    assert not {path: names for path, names in breaks.items() if names}


def test_the_checker_sees_imports_inside_functions(tmp_path):
    module = tmp_path / "module.py"
    module.write_text("import os\n\ndef f():\n    from training.trainer import Trainer\n")
    assert imported_top_levels(module) == {"os", "training"}
