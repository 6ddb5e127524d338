"""Checkpoints of BERT in every format this project reads or writes, through one entry point.

Code outside the package imports from here (`from modeling import checkpoints`):

- loading into a built model: `load_checkpoint` (what `--init_checkpoint` calls), `checkpoint_step`,
  `detect_format`, `FORMATS` and their `DESCRIPTIONS`;
- whole model folders, for conversion and export: `read_model`, `write_model`, `LoadedModel`;
- heads: `HEAD_NAMES`, `ModelSpec`, `model_spec`, `build_model`, and `write_model_spec`, the one
  writer of `model_spec.json` (`SPEC_FILE`);
- the original TF1 format: `save_tf1_checkpoint` (with the optimizer's moments under the original's
  slot names), `resolve_checkpoint_prefix`, `tf1_name`;
- what a strict load raises: `CheckpointMismatchError`, `CorruptCheckpointError`,
  `UnsupportedCheckpointError`, `NameTableError`.

Inside: `formats` (the format table), `folder_readers` and `folders` (whole folders), one module
per format (`tf1`, `keras_format`, `hf` with `hf_config` and `hf_names`, `model_garden` with
`model_garden_config` and `model_garden_names`, `tf_hub` for the SavedModels exported from Model
Garden, read as data, `keras_hub` with `keras_hub_config`, `keras_hub_names` and
`keras_hub_weights` for KerasHub presets, read as data), `names` (the name table) and `heads` (a
checkpoint's head).
"""
from modeling.checkpoints.errors import (CheckpointMismatchError, CorruptCheckpointError,
                                         NameTableError, UnsupportedCheckpointError)
from modeling.checkpoints.folders import LoadedModel, read_model, write_model
from modeling.checkpoints.formats import (DESCRIPTIONS, FORMATS, checkpoint_step, detect_format,
                                          load_checkpoint)
from modeling.checkpoints.heads import (HEAD_NAMES, SPEC_FILE, ModelSpec, build_model, model_spec,
                                        write_model_spec)
from modeling.checkpoints.names import tf1_name
from modeling.checkpoints.tf1 import resolve_checkpoint_prefix, save_tf1_checkpoint

__all__ = [
    "CheckpointMismatchError",
    "CorruptCheckpointError",
    "DESCRIPTIONS",
    "FORMATS",
    "HEAD_NAMES",
    "LoadedModel",
    "ModelSpec",
    "NameTableError",
    "SPEC_FILE",
    "UnsupportedCheckpointError",
    "build_model",
    "checkpoint_step",
    "detect_format",
    "load_checkpoint",
    "model_spec",
    "read_model",
    "resolve_checkpoint_prefix",
    "save_tf1_checkpoint",
    "tf1_name",
    "write_model",
    "write_model_spec",
]
