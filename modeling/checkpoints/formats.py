"""The checkpoint formats, told apart in one place, and loading one into a built model.

- `tf1`: Google's original name-based checkpoint (`bert_model.ckpt`), as released and as the
  original scripts write it (`modeling.checkpoints.tf1`).
- `keras`: this project's object-based checkpoint (`model.ckpt`), written by training runs and by
  `convert_checkpoint.py --to keras` (`modeling.checkpoints.project`).
- `hf`: a Hugging Face folder (`config.json` + `model.safetensors`, `modeling.checkpoints.hf`).
- `model_garden`: an object-based checkpoint of Model Garden's `BertEncoder` or `BertPretrainerV2`;
  `tf_hub`: a TF-Hub / Kaggle BERT encoder SavedModel (`modeling.checkpoints.model_garden`).

`load_checkpoint` is what `--init_checkpoint` of every script calls; `folders.read_model` builds
the model a checkpoint folder calls for. Loading is strict in every format: a checkpoint that does
not fit raises `errors.CheckpointMismatchError` and leaves the model as it was.
"""
import logging

import keras
import tensorflow as tf

from modeling.checkpoints.hf import is_hf_folder, load_hf_checkpoint
from modeling.checkpoints.model_garden import (is_model_garden_checkpoint, is_tf_hub_folder,
                                               load_model_garden_checkpoint,
                                               load_tf_hub_checkpoint)
from modeling.checkpoints.project import is_project_checkpoint, load_project_checkpoint
from modeling.checkpoints.tf1 import load_tf1_checkpoint, resolve_checkpoint_prefix

TF1, KERAS, HF = "tf1", "keras", "hf"
MODEL_GARDEN, TF_HUB = "model_garden", "tf_hub"
FORMATS = (TF1, KERAS, HF, MODEL_GARDEN, TF_HUB)
DESCRIPTIONS = {TF1: "original TF1 (name-based) checkpoint",
                KERAS: "project (TF2 object-based) checkpoint",
                HF: "Hugging Face folder",
                MODEL_GARDEN: "Model Garden (TF2 object-based) BERT checkpoint",
                TF_HUB: "TF-Hub BERT encoder SavedModel"}
_STEP_NAMES = ("global_step", "optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE")


def detect_format(path: str) -> str:
    """`hf` for a folder with `config.json`, `tf_hub` for a SavedModel folder, else `model_garden`,
    `keras` or `tf1` by the checkpoint's kind.

    Args:
        path: checkpoint prefix, or the folder holding it.
    """
    if is_hf_folder(path):
        return HF
    if is_tf_hub_folder(path):
        return TF_HUB
    prefix = resolve_checkpoint_prefix(path)
    if not is_project_checkpoint(prefix):
        return TF1
    return MODEL_GARDEN if is_model_garden_checkpoint(prefix) else KERAS


def load_checkpoint(model: keras.Model, path: str) -> str:
    """Loads a checkpoint of any format into `model` and says which format it found.

    Args:
        model: the model, or only its encoder (`model.encoder`) to initialise an encoder from a
            checkpoint written with other heads.
        path: checkpoint prefix or the folder holding it; a Hugging Face or SavedModel folder.

    Returns:
        The format found: one of FORMATS.

    Raises:
        CheckpointMismatchError: the checkpoint does not fit the model (nothing was loaded).
        CorruptCheckpointError: its files cannot be read.
    """
    found = detect_format(path)
    source = path if found in (HF, TF_HUB) else resolve_checkpoint_prefix(path)
    {TF1: load_tf1_checkpoint, KERAS: load_project_checkpoint, HF: load_hf_checkpoint,
     MODEL_GARDEN: load_model_garden_checkpoint, TF_HUB: load_tf_hub_checkpoint}[found](
        model, source)
    logging.info("loaded %s %s into %s", DESCRIPTIONS[found], source, model.name)
    return found


def checkpoint_step(path: str) -> int:
    """The training step a checkpoint was written at: `global_step` (TF1) or the optimizer's
    iteration count (project); 0 when it records none (a Hugging Face folder, say)."""
    if is_hf_folder(path) or is_tf_hub_folder(path):
        return 0
    reader = tf.train.load_checkpoint(resolve_checkpoint_prefix(path))
    for name in _STEP_NAMES:
        if reader.has_tensor(name):
            return int(reader.get_tensor(name))
    return 0
