"""The three checkpoint formats, told apart in one place, and loading one into a built model.

- `tf1`: Google's original name-based checkpoint (`bert_model.ckpt`), as released and as the
  original scripts write it (`modeling.checkpoints.tf1`).
- `keras`: this project's object-based checkpoint (`model.ckpt`), written by training runs and by
  `convert_checkpoint.py --to keras` (`modeling.checkpoints.project`).
- `hf`: a Hugging Face folder (`config.json` + `model.safetensors`, `modeling.checkpoints.hf`).

`load_checkpoint` is what `--init_checkpoint` of every script calls; `folders.read_model` builds
the model a checkpoint folder calls for. Loading is strict in every format: a checkpoint that does
not fit raises `errors.CheckpointMismatchError` and leaves the model as it was.
"""
import logging

import keras
import tensorflow as tf

from modeling.checkpoints.hf import is_hf_folder, load_hf_checkpoint
from modeling.checkpoints.project import is_project_checkpoint, load_project_checkpoint
from modeling.checkpoints.tf1 import load_tf1_checkpoint, resolve_checkpoint_prefix

TF1, KERAS, HF = "tf1", "keras", "hf"
FORMATS = (TF1, KERAS, HF)
DESCRIPTIONS = {TF1: "original TF1 (name-based) checkpoint",
                KERAS: "project (TF2 object-based) checkpoint",
                HF: "Hugging Face folder"}
_STEP_NAMES = ("global_step", "optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE")


def detect_format(path: str) -> str:
    """`hf` for a folder with `config.json`, else `keras` or `tf1` by the checkpoint's kind.

    Args:
        path: checkpoint prefix, or the folder holding it.
    """
    if is_hf_folder(path):
        return HF
    return KERAS if is_project_checkpoint(resolve_checkpoint_prefix(path)) else TF1


def load_checkpoint(model: keras.Model, path: str) -> str:
    """Loads a checkpoint of any format into `model` and says which format it found.

    Args:
        model: the model, or only its encoder (`model.encoder`) to initialise an encoder from a
            checkpoint written with other heads.
        path: checkpoint prefix or the folder holding it; a Hugging Face folder.

    Returns:
        The format found: `TF1`, `KERAS` or `HF`.

    Raises:
        CheckpointMismatchError: the checkpoint does not fit the model (nothing was loaded).
        CorruptCheckpointError: its files cannot be read.
    """
    found = detect_format(path)
    source = path if found == HF else resolve_checkpoint_prefix(path)
    {TF1: load_tf1_checkpoint, KERAS: load_project_checkpoint,
     HF: load_hf_checkpoint}[found](model, source)
    logging.info("loaded %s %s into %s", DESCRIPTIONS[found], source, model.name)
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
