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
    # Serving puts the tokenizer and the models of modeling/ in one graph; it calls no task.
    "serving": {"data", "modeling", "utils"},
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


def test_test_modules_share_code_through_tests_support_only():
    """A test module imports helpers from tests/support/, never another test module."""
    root = pathlib.Path(REPO_ROOT)
    breaks = {}
    for path in sorted((root / "tests").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules = {node.module for node in ast.walk(tree)
                   if isinstance(node, ast.ImportFrom) and node.module and node.level == 0}
        modules |= {f"{node.module}.{alias.name}" for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and node.module == "tests"
                    for alias in node.names}
        modules |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                    for alias in node.names}
        wrong = sorted(name for name in modules if name.split(".")[0] == "tests"
                       and name != "tests" and not name.startswith("tests.support"))
        if wrong:
            breaks[str(path.relative_to(root))] = wrong
    assert not breaks
