"""Model folders in every format: read into the model their head calls for, written from one.

Reading goes through the format table (`formats.FORMAT_TABLE`, one reader per format in
`folder_readers`). Every writer checks what it can before writing, writes into a temporary folder
beside the target and renames it into place, so a failed conversion leaves nothing behind:

- `tf1`: `bert_model.ckpt` + `bert_config.json` + `vocab.txt`, as the original scripts read it.
- `keras`: `model.ckpt` + `bert_config.json` + `vocab.txt` + `model_spec.json`.
- `hf`: a Hugging Face folder (`hf/`).
- `model_garden`: Model Garden's object-based `bert_model.ckpt` + `bert_config.json` + `vocab.txt`
  (`model_garden/`).
- `keras_hub`: a KerasHub preset folder (`keras_hub/`): the encoder as `BertBackbone`, a classifier
  as `BertTextClassifier`, pretraining heads dropped with a warning.
- `tf_hub` is read only (`tf_hub/`; `export_savedmodel.py` writes TF-Hub style SavedModels).
"""
from __future__ import annotations

import os
import shutil

from modeling.checkpoints.errors import UnsupportedCheckpointError
from modeling.checkpoints.folder_readers import BERT_CONFIG_FILE, FolderFiles, LoadedModel
from modeling.checkpoints.formats import (FORMAT_TABLE, FORMATS, HF, KERAS, KERAS_HUB,
                                          MODEL_GARDEN, TF1, TF_HUB, locate)
from modeling.checkpoints.hf.checkpoint import VOCAB_FILE, check_hf_writable, write_hf_checkpoint
from modeling.checkpoints.keras_format.checkpoint import save_keras_checkpoint
from modeling.checkpoints.keras_hub.preset import check_keras_hub_writable, write_keras_hub_preset
from modeling.checkpoints.model_garden.checkpoint import (check_model_garden_writable,
                                                          write_model_garden_checkpoint)
from modeling.checkpoints.model_specs import model_spec, write_model_spec
from modeling.checkpoints.tf1.checkpoint import save_tf1_checkpoint
from utils.output_files import atomic_output_folder

TF1_PREFIX = "bert_model.ckpt"
KERAS_PREFIX = "model.ckpt"


def read_model(path: str, input_format: str | None = None, bert_config_file: str | None = None,
               vocab_file: str | None = None, head: str | None = None) -> LoadedModel:
    """Reads a checkpoint of any format into the model its head calls for.

    Args:
        path: checkpoint prefix, or the folder holding it (a Hugging Face folder).
        input_format: one of FORMATS; detected when None.
        bert_config_file, vocab_file: override the files beside the checkpoint.
        head: the head of a keras checkpoint that has no `model_spec.json`.

    Raises:
        UnsupportedCheckpointError: unknown variables or heads, a vocab-size mismatch.
        CheckpointMismatchError, CorruptCheckpointError: weights that do not fit or cannot be read.
        FileNotFoundError: the checkpoint, its config or its vocab is missing.
    """
    found = locate(path, input_format)
    return FORMAT_TABLE[found.format].read(found, FolderFiles(bert_config_file, vocab_file, head))


def _check_writable(loaded: LoadedModel, output_format: str) -> None:
    if output_format not in FORMATS:
        raise ValueError(f"unknown format {output_format!r}; valid formats: {', '.join(FORMATS)}")
    if output_format == TF_HUB:
        raise UnsupportedCheckpointError("tf_hub is read only; export_savedmodel.py writes "
                                         "TF-Hub style SavedModels")
    if output_format == HF:
        check_hf_writable(loaded.spec)
    if output_format == MODEL_GARDEN:
        check_model_garden_writable(loaded.spec)
    if output_format == KERAS_HUB:
        check_keras_hub_writable(loaded.model, loaded.vocab_file)
    if model_spec(loaded.model) != loaded.spec:
        raise ValueError(f"the model is a {model_spec(loaded.model)}, not a {loaded.spec}")


def write_model(loaded: LoadedModel, output_format: str, output: str,
                do_lower_case: bool) -> None:
    """Writes a model in a format, as the folder `output` (absent or empty), all or nothing."""
    _check_writable(loaded, output_format)
    with atomic_output_folder(output) as folder:
        if output_format == HF:
            write_hf_checkpoint(loaded.model, folder, loaded.vocab_file, do_lower_case,
                                loaded.labels)
            return
        if output_format == KERAS_HUB:
            write_keras_hub_preset(loaded.model, folder, loaded.vocab_file, do_lower_case)
            return
        if output_format == MODEL_GARDEN:
            write_model_garden_checkpoint(loaded.model, os.path.join(folder, TF1_PREFIX))
        elif output_format == TF1:
            save_tf1_checkpoint(loaded.model, os.path.join(folder, TF1_PREFIX))
        elif output_format == KERAS:
            save_keras_checkpoint(loaded.model, os.path.join(folder, KERAS_PREFIX))
            write_model_spec(folder, loaded.spec, do_lower_case, loaded.labels,
                             loaded.problem_type)
        loaded.model.config.to_json_file(os.path.join(folder, BERT_CONFIG_FILE))
        shutil.copyfile(loaded.vocab_file, os.path.join(folder, VOCAB_FILE))
