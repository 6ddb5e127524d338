"""Every script's entry point: `entry_point.run(main)`.

`run` runs `main` under absl with:
- SIGTERM and SIGINT stopping it through Python's exception path (`utils.stop_signals`);
- a mistake of the user's reported as one line, `error: ...`, and exit status 1
  (`utils.user_errors`; `--verbose` keeps the traceback);
- `--help` listing every flag the script reads, those defined by the project's shared flag
  modules included, not only the script's own.

This module does not import TensorFlow: the data scripts (`create_pretraining_data.py`,
`build_vocab.py`) and their worker processes never load it, which would cost each process seconds
and half a gigabyte. A script that runs a model imports `utils.tensorflow_startup` before this
module and anything else that imports TensorFlow, so that TensorFlow's start-up messages stay off
the terminal.
"""
from __future__ import annotations

import os
import sys
from typing import Callable

from absl import app, flags

from utils.stop_signals import raise_on_stop_signals
from utils.user_errors import TRACEBACK_VARIABLE, report_user_errors

_PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _is_project_module(module_name: str) -> bool:
    top = module_name.split(".")[0]
    return any(os.path.exists(os.path.join(_PROJECT_ROOT, top + suffix)) for suffix in (".py", ""))


def _show_every_project_flag_in_help() -> None:
    """Makes each flag a project module defined a key flag of the script, which `--help` lists."""
    script = sys.argv[0]
    for module, defined in flags.FLAGS.flags_by_module_dict().items():
        if module != script and _is_project_module(module):
            for flag in defined:
                flags.FLAGS.register_key_flag_for_module(script, flag)


def run(main: Callable[[list[str]], object]) -> None:
    """`absl.app.run(main)`, with stop signals, user errors and `--help` as the module says."""
    flags.DEFINE_bool("verbose", False, "Print the traceback of every error, the user's "
                      f"mistakes included (also {TRACEBACK_VARIABLE}=1).")
    _show_every_project_flag_in_help()
    raise_on_stop_signals()
    app.run(report_user_errors(main, lambda: flags.FLAGS.verbose))
