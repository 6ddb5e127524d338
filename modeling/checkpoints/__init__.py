"""Checkpoints of BERT in every format this project reads or writes, through one entry point.

Code outside the package imports from here (`from modeling import checkpoints`):

- loading into a built model: `load_checkpoint` (what `--init_checkpoint` calls), `checkpoint_step`,
  `detect_format`, `FORMATS` and their `DESCRIPTIONS`;
- whole model folders, for conversion and export: `read_model`, `write_model`, `LoadedModel`;
- heads: `HEAD_NAMES`, `ModelSpec`, `model_spec`, `build_model`, and `write_model_spec`, the one
  writer of `model_spec.json` (`SPEC_FILE`);
- new tokens in a vocabulary's [unusedN] slots: `initialise_new_token_rows`;
- a smaller model of some of a model's layers: `copy_layers`, `layer_values`, `check_layers`;
- the original TF1 format: `save_tf1_checkpoint` (with the optimizer's moments under the original's
  slot names), `resolve_checkpoint_prefix`, `tf1_name`;
- what a strict load raises: `CheckpointMismatchError`, `CorruptCheckpointError`,
  `UnsupportedCheckpointError`, `NameTableError`.

Inside, what every format shares: `formats` (the format table), `folder_readers` and `folders`
(whole folders), `errors`, `names` (the name table) and `model_specs` (a checkpoint's head and
`model_spec.json`). Then one subpackage per format, each with its reader and writer and, where the
format has them, its config and name table: `tf1/` (`checkpoint`), `keras_format/` (`checkpoint`,
this project's `keras` format), `hf/` (`checkpoint`, `config`, `names`), `model_garden/`
(`checkpoint`, `config`, `names`), `tf_hub/` (`saved_model`, the SavedModels exported from Model
Garden, read as data with `model_garden/`'s config and names) and `keras_hub/` (`preset`,
`config`, `names`, `weights`, KerasHub presets read as data). `layer_subset`: some layers of a
model, by their names.
"""
from modeling.checkpoints.errors import (CheckpointMismatchError, CorruptCheckpointError,
                                         NameTableError, UnsupportedCheckpointError)
from modeling.checkpoints.folders import LoadedModel, read_model, write_model
from modeling.checkpoints.formats import (DESCRIPTIONS, FORMATS, checkpoint_step, detect_format,
                                          load_checkpoint)
from modeling.checkpoints.model_specs import (HEAD_NAMES, SPEC_FILE, ModelSpec, build_model,
                                              model_spec, write_model_spec)
from modeling.checkpoints.layer_subset import check_layers, copy_layers, layer_values
from modeling.checkpoints.names import tf1_name
from modeling.checkpoints.new_token_rows import initialise_new_token_rows
from modeling.checkpoints.tf1.checkpoint import resolve_checkpoint_prefix, save_tf1_checkpoint

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
    "check_layers",
    "checkpoint_step",
    "copy_layers",
    "detect_format",
    "initialise_new_token_rows",
    "layer_values",
    "load_checkpoint",
    "model_spec",
    "read_model",
    "resolve_checkpoint_prefix",
    "save_tf1_checkpoint",
    "tf1_name",
    "write_model",
    "write_model_spec",
]
