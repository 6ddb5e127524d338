"""One entry point for `--init_checkpoint`: detects the checkpoint's format and loads it strictly."""
import logging

import keras

from modeling.project_checkpoint import is_project_checkpoint, load_project_checkpoint
from modeling.tf1_checkpoint import load_tf1_checkpoint, resolve_checkpoint_prefix

TF1 = "original TF1 (name-based) checkpoint"
PROJECT = "project (TF2 object-based) checkpoint"


def load_checkpoint(model: keras.Model, path: str) -> str:
    """Loads an original TF1 or a project checkpoint into a built model and says which it found.

    Args:
        model: the model, or only its encoder (`model.encoder`) to initialise an encoder from a
            checkpoint written with other heads.
        path: checkpoint prefix or the folder holding it.

    Returns:
        The format found (`TF1` or `PROJECT`).
    """
    prefix = resolve_checkpoint_prefix(path)
    if is_project_checkpoint(prefix):
        load_project_checkpoint(model, prefix)
        found = PROJECT
    else:
        load_tf1_checkpoint(model, prefix)
        found = TF1
    logging.info("loaded %s %s into %s", found, prefix, model.name)
    return found
