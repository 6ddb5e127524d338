"""One entry point for `--init_checkpoint`: detects the format and loads the checkpoint strictly."""
import logging

import keras
import tensorflow as tf

from modeling.checkpoints.hf import is_hf_folder, load_hf_checkpoint
from modeling.checkpoints.project import (ProjectCheckpointMismatchError, is_project_checkpoint,
                                         load_project_checkpoint)
from modeling.checkpoints.tf1 import (CheckpointMismatchError, load_tf1_checkpoint,
                                     resolve_checkpoint_prefix)

# What a strict load raises when a checkpoint does not fit the model, whatever its format.
MISMATCH_ERRORS = (CheckpointMismatchError, ProjectCheckpointMismatchError)
_STEP_NAMES = ("global_step", "optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE")

TF1 = "original TF1 (name-based) checkpoint"
PROJECT = "project (TF2 object-based) checkpoint"
HF = "Hugging Face folder"


def load_checkpoint(model: keras.Model, path: str) -> str:
    """Loads an original TF1, a project or a Hugging Face checkpoint and says which it found.

    Args:
        model: the model, or only its encoder (`model.encoder`) to initialise an encoder from a
            checkpoint written with other heads.
        path: checkpoint prefix or the folder holding it; a Hugging Face folder (config.json +
            model.safetensors).

    Returns:
        The format found (`TF1`, `PROJECT` or `HF`).
    """
    if is_hf_folder(path):
        load_hf_checkpoint(model, path)
        found, source = HF, path
    else:
        source = resolve_checkpoint_prefix(path)
        if is_project_checkpoint(source):
            load_project_checkpoint(model, source)
            found = PROJECT
        else:
            load_tf1_checkpoint(model, source)
            found = TF1
    logging.info("loaded %s %s into %s", found, source, model.name)
    return found


def checkpoint_step(path: str) -> int:
    """The training step a checkpoint was written at: `global_step` (TF1) or the optimizer's
    iteration count (project); 0 when it records none (a Hugging Face folder, say)."""
    if is_hf_folder(path):
        return 0
    reader = tf.train.load_checkpoint(resolve_checkpoint_prefix(path))
    for name in _STEP_NAMES:
        if reader.has_tensor(name):
            return int(reader.get_tensor(name))
    return 0
