"""The checkpoint formats, one table row each: how the format is recognised, how it loads into a
built model, how a whole folder of it is read.

- `tf1`: Google's original name-based checkpoint (`bert_model.ckpt`), as released and as the
  original scripts write it (`tf1/`).
- `keras`: this project's object-based checkpoint (`model.ckpt`), written by training runs and by
  `convert_checkpoint.py --to keras` (`keras_format/`).
- `hf`: a Hugging Face folder (`config.json` + `model.safetensors`, `hf/`).
- `model_garden`: an object-based checkpoint of Model Garden's `BertEncoder` or `BertPretrainerV2`
  (`model_garden/`).
- `tf_hub`: a TF-Hub / Kaggle BERT encoder SavedModel, read as data, never loaded
  (`tf_hub/`).
- `keras_hub`: a KerasHub BERT preset folder (`config.json` + `model.weights.h5` + tokenizer), read
  as data, never loaded (`keras_hub/`).

`load_checkpoint` is what `--init_checkpoint` of every script calls; `folders.read_model` builds
the model a checkpoint folder calls for. Both go through `locate`, which resolves a checkpoint's
path and opens its file once. Loading is strict in every format: a checkpoint that does not fit
raises `errors.CheckpointMismatchError` and leaves the model as it was.
"""
from __future__ import annotations

import dataclasses
import logging
from typing import Any, Callable

import keras

from modeling.checkpoints.folder_readers import (FolderFiles, FoundCheckpoint, LoadedModel,
                                                 read_hf_folder, read_keras_folder,
                                                 read_keras_hub_folder, read_model_garden_folder,
                                                 read_tf1_folder, read_tf_hub_folder)
from modeling.checkpoints.hf.checkpoint import is_hf_folder, load_hf_checkpoint
from modeling.checkpoints.keras_format.checkpoint import is_object_based, load_keras_checkpoint
from modeling.checkpoints.keras_hub.preset import is_keras_hub_folder, load_keras_hub_checkpoint
from modeling.checkpoints.model_garden.checkpoint import (is_model_garden_checkpoint,
                                                          load_model_garden_checkpoint)
from modeling.checkpoints.tf1.checkpoint import (load_tf1_checkpoint, open_checkpoint,
                                                 resolve_checkpoint_prefix)
from modeling.checkpoints.tf_hub.saved_model import is_tf_hub_folder, load_tf_hub_checkpoint

TF1, KERAS, HF = "tf1", "keras", "hf"
MODEL_GARDEN, TF_HUB, KERAS_HUB = "model_garden", "tf_hub", "keras_hub"
_STEP_NAMES = ("global_step", "optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE")


@dataclasses.dataclass(frozen=True)
class Format:
    """What the code knows of one checkpoint format."""

    description: str
    # True for a folder format (hf, tf_hub, keras_hub): `detect` takes its path, and no checkpoint
    # file is opened; else `detect` takes the open checkpoint.
    is_folder: bool
    # Whether the path or the open checkpoint is of this format.
    detect: Callable[[Any], bool]
    # Assigns the checkpoint to a built model, all or nothing.
    load: Callable[[keras.Model, FoundCheckpoint], object]
    # Builds and loads the model a folder of this format calls for.
    read: Callable[[FoundCheckpoint, FolderFiles], LoadedModel]


# In the order of detection: folder formats first (a KerasHub preset's config.json before a Hugging
# Face one), then object-based before name-based.
FORMAT_TABLE = {
    KERAS_HUB: Format("KerasHub BERT preset", True, is_keras_hub_folder,
                      lambda model, found: load_keras_hub_checkpoint(model, found.path),
                      read_keras_hub_folder),
    HF: Format("Hugging Face folder", True, is_hf_folder,
               lambda model, found: load_hf_checkpoint(model, found.path), read_hf_folder),
    TF_HUB: Format("TF-Hub BERT encoder SavedModel", True, is_tf_hub_folder,
                   lambda model, found: load_tf_hub_checkpoint(model, found.path),
                   read_tf_hub_folder),
    MODEL_GARDEN: Format(
        "Model Garden (TF2 object-based) BERT checkpoint", False,
        lambda reader: is_object_based(reader) and is_model_garden_checkpoint(reader),
        lambda model, found: load_model_garden_checkpoint(model, found.path, found.reader),
        read_model_garden_folder),
    KERAS: Format("project (TF2 object-based) checkpoint", False, is_object_based,
                  lambda model, found: load_keras_checkpoint(model, found.path),
                  read_keras_folder),
    TF1: Format("original TF1 (name-based) checkpoint", False, lambda reader: True,
                lambda model, found: load_tf1_checkpoint(model, found.path, found.reader),
                read_tf1_folder),
}
FORMATS = (TF1, KERAS, HF, MODEL_GARDEN, TF_HUB, KERAS_HUB)
DESCRIPTIONS = {name: FORMAT_TABLE[name].description for name in FORMATS}


def locate(path: str, input_format: str | None = None) -> FoundCheckpoint:
    """Finds a checkpoint's format, resolves its path and opens its file, each once.

    Args:
        path: checkpoint prefix, or the folder holding it; a Hugging Face, SavedModel or KerasHub
            preset folder.
        input_format: one of FORMATS, taken as given; detected when None.

    Raises:
        FileNotFoundError: no checkpoint at `path`.
        CorruptCheckpointError: its files cannot be read.
    """
    if input_format is not None and input_format not in FORMAT_TABLE:
        raise ValueError(f"unknown format {input_format!r}; valid formats: {', '.join(FORMATS)}")
    for name, row in FORMAT_TABLE.items():
        if row.is_folder and (name == input_format or input_format is None and row.detect(path)):
            return FoundCheckpoint(name, path)
    prefix = resolve_checkpoint_prefix(path)
    reader = open_checkpoint(prefix)
    found = input_format or next(name for name, row in FORMAT_TABLE.items()
                                 if not row.is_folder and row.detect(reader))
    return FoundCheckpoint(found, prefix, reader)


def detect_format(path: str) -> str:
    """`keras_hub` for a KerasHub preset, `hf` for another folder with `config.json`, `tf_hub` for
    a SavedModel folder, else `model_garden`, `keras` or `tf1` by the checkpoint's kind.

    Args:
        path: checkpoint prefix, or the folder holding it.
    """
    return locate(path).format


def load_checkpoint(model: keras.Model, path: str) -> str:
    """Loads a checkpoint of any format into `model` and says which format it found.

    Args:
        model: the model, or only its encoder (`model.encoder`) to initialise an encoder from a
            checkpoint written with other heads.
        path: checkpoint prefix or the folder holding it; a Hugging Face, SavedModel or KerasHub
            preset folder.

    Returns:
        The format found: one of FORMATS.

    Raises:
        CheckpointMismatchError: the checkpoint does not fit the model (nothing was loaded).
        CorruptCheckpointError: its files cannot be read.
    """
    found = locate(path)
    FORMAT_TABLE[found.format].load(model, found)
    logging.info("loaded %s %s into %s", DESCRIPTIONS[found.format], found.path, model.name)
    return found.format


def checkpoint_step(path: str) -> int:
    """The training step a checkpoint was written at: `global_step` (TF1) or the optimizer's
    iteration count (keras); 0 when it records none (a Hugging Face folder, say)."""
    reader = locate(path).reader
    for name in _STEP_NAMES:
        if reader is not None and reader.has_tensor(name):
            return int(reader.get_tensor(name))
    return 0
