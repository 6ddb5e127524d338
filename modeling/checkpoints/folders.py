"""Model folders in every format: read into the model their head calls for, written from one.

- `tf1`: Google's original name-based checkpoint `bert_model.ckpt` + `bert_config.json` +
  `vocab.txt`, as released and as the original scripts read it.
- `keras`: this project's object-based checkpoint `model.ckpt` + `bert_config.json` +
  `vocab.txt` + `model_spec.json` (the head and label count, and the tokenizer's casing).
- `hf`: a Hugging Face folder (`modeling.checkpoints.hf`).
- `model_garden`: Model Garden's object-based `bert_model.ckpt` + `params.yaml` (or
  `bert_config.json`) + `vocab.txt`; `tf_hub`: a TF-Hub BERT encoder SavedModel, read only
  (`modeling.checkpoints.model_garden`).

Every reader builds the model the checkpoint's head calls for and loads it strictly; every writer
checks what it can before writing, writes into a temporary folder beside the target and renames
it into place, so a failed conversion leaves nothing behind.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil

import keras
import tensorflow as tf

from modeling.checkpoints.errors import UnsupportedCheckpointError
from modeling.checkpoints.formats import FORMATS, HF, MODEL_GARDEN, TF1, TF_HUB, detect_format
from modeling.checkpoints.heads import ModelSpec, build_model, detect_model_spec, model_spec
from modeling.checkpoints.hf import (VOCAB_FILE, check_hf_writable, read_hf_checkpoint,
                                     write_hf_checkpoint)
from modeling.checkpoints.model_garden import (check_model_garden_writable,
                                               read_model_garden_config,
                                               read_model_garden_values, read_tf_hub_values,
                                               write_model_garden_checkpoint)
from modeling.checkpoints.project import (load_project_checkpoint, project_model_spec,
                                          save_project_checkpoint)
from modeling.checkpoints.tf1 import (assign_tf1_values, load_tf1_checkpoint,
                                      resolve_checkpoint_prefix, save_tf1_checkpoint)
from modeling.config import BertConfig
from utils.output_files import atomic_output_folder

CONFIG_FILE = "bert_config.json"
SPEC_FILE = "model_spec.json"
TF1_PREFIX = "bert_model.ckpt"
KERAS_PREFIX = "model.ckpt"


@dataclasses.dataclass
class LoadedModel:
    """A model read from a checkpoint folder, with what travels beside its weights."""

    model: keras.Model
    spec: ModelSpec
    vocab_file: str
    # The tokenizer's casing where the input says it (Hugging Face, keras formats); else None.
    do_lower_case: bool | None


def count_vocab_lines(vocab_file: str) -> int:
    """Tokens of a vocab.txt: its lines, split at "\\n" as the original `load_vocab` reads them."""
    with open(vocab_file, "rb") as f:
        data = f.read()
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def _beside(folder: str, given: str | None, name: str, flag: str) -> str:
    path = given or os.path.join(folder, name)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} not found; pass {flag}")
    return path


def _check_vocab(vocab_file: str, config: BertConfig) -> None:
    lines = count_vocab_lines(vocab_file)
    if lines != config.vocab_size:
        raise UnsupportedCheckpointError(
            f"vocab size mismatch: {vocab_file} has {lines} tokens, the config says "
            f"vocab_size={config.vocab_size}")


def read_model(path: str, input_format: str | None = None, bert_config_file: str | None = None,
               vocab_file: str | None = None, head: str | None = None) -> LoadedModel:
    """Reads a checkpoint of any format into the model its head calls for.

    Args:
        path: checkpoint prefix, or the folder holding it (a Hugging Face folder).
        input_format: one of FORMATS; detected when None.
        bert_config_file, vocab_file: override the files beside the checkpoint.
        head: the head of a project checkpoint that has no `model_spec.json`.

    Raises:
        UnsupportedCheckpointError: unknown variables or heads, a vocab-size mismatch.
        CheckpointMismatchError, CheckpointMismatchError: weights that do not fit.
        FileNotFoundError: the checkpoint, its config or its vocab is missing.
    """
    input_format = input_format or detect_format(path)
    if input_format == HF:
        checkpoint = read_hf_checkpoint(path)
        vocab = _beside(path, vocab_file, VOCAB_FILE, "--vocab_file")
        _check_vocab(vocab, checkpoint.config)
        model = build_model(checkpoint.config, checkpoint.spec)
        assign_tf1_values(model, checkpoint.values, path)
        return LoadedModel(model, checkpoint.spec, vocab, checkpoint.do_lower_case)
    if input_format == TF_HUB:
        return _read_tf_hub(path, bert_config_file, vocab_file)
    prefix = resolve_checkpoint_prefix(path)
    folder = os.path.dirname(prefix)
    config = (read_model_garden_config(folder, prefix)
              if input_format == MODEL_GARDEN and not bert_config_file else None)
    config = config or BertConfig.from_json_file(
        _beside(folder, bert_config_file, CONFIG_FILE, "--bert_config_file"))
    vocab = _beside(folder, vocab_file, VOCAB_FILE, "--vocab_file")
    _check_vocab(vocab, config)
    if input_format == TF1:
        shapes = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
        spec, do_lower_case = detect_model_spec(shapes, prefix), None
        model = build_model(config, spec)
        load_tf1_checkpoint(model, prefix)
    elif input_format == MODEL_GARDEN:
        values = read_model_garden_values(prefix, config.num_hidden_layers)
        spec, do_lower_case = detect_model_spec(
            {name: value.shape for name, value in values.items()}, prefix), None
        model = build_model(config, spec)
        assign_tf1_values(model, values, f"checkpoint {prefix}")
    else:
        saved = _read_spec_file(os.path.join(folder, SPEC_FILE))
        spec = ModelSpec.from_dict(saved) if saved and not head else \
            project_model_spec(prefix, head)
        do_lower_case = saved.get("do_lower_case") if saved else None
        model = build_model(config, spec)
        load_project_checkpoint(model, prefix)
    return LoadedModel(model, spec, vocab, do_lower_case)


def _read_tf_hub(folder: str, bert_config_file: str | None, vocab_file: str | None
                 ) -> LoadedModel:
    given = BertConfig.from_json_file(bert_config_file) if bert_config_file else None
    config, values, do_lower_case = read_tf_hub_values(folder, given)
    vocab = _beside(os.path.join(folder, "assets"), vocab_file, VOCAB_FILE, "--vocab_file")
    _check_vocab(vocab, config)
    spec = ModelSpec("encoder")
    model = build_model(config, spec)
    assign_tf1_values(model, values, folder)
    return LoadedModel(model, spec, vocab, do_lower_case)


def _read_spec_file(path: str) -> dict | None:
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _save_keras(model: keras.Model, folder: str, spec: ModelSpec, do_lower_case: bool) -> None:
    save_project_checkpoint(model, os.path.join(folder, KERAS_PREFIX))
    with open(os.path.join(folder, SPEC_FILE), "w", encoding="utf-8") as f:
        json.dump({**spec.to_dict(), "do_lower_case": do_lower_case}, f, indent=2, sort_keys=True)
        f.write("\n")


def write_model(loaded: LoadedModel, output_format: str, output: str,
                do_lower_case: bool) -> None:
    """Writes a model in a format, as the folder `output` (absent or empty), all or nothing."""
    if output_format not in FORMATS:
        raise ValueError(f"unknown format {output_format!r}; valid formats: {', '.join(FORMATS)}")
    if output_format == TF_HUB:
        raise UnsupportedCheckpointError("tf_hub is read only; export_savedmodel.py writes "
                                         "TF-Hub style SavedModels")
    if output_format == HF:
        check_hf_writable(loaded.spec)
    if output_format == MODEL_GARDEN:
        check_model_garden_writable(loaded.spec)
    if model_spec(loaded.model) != loaded.spec:
        raise ValueError(f"the model is a {model_spec(loaded.model)}, not a {loaded.spec}")
    with atomic_output_folder(output) as folder:
        if output_format == HF:
            write_hf_checkpoint(loaded.model, folder, loaded.vocab_file, do_lower_case)
        elif output_format == MODEL_GARDEN:
            write_model_garden_checkpoint(loaded.model, os.path.join(folder, TF1_PREFIX))
            loaded.model.config.to_json_file(os.path.join(folder, CONFIG_FILE))
            shutil.copyfile(loaded.vocab_file, os.path.join(folder, VOCAB_FILE))
        else:
            if output_format == TF1:
                save_tf1_checkpoint(loaded.model, os.path.join(folder, TF1_PREFIX))
            else:
                _save_keras(loaded.model, folder, loaded.spec, do_lower_case)
            loaded.model.config.to_json_file(os.path.join(folder, CONFIG_FILE))
            shutil.copyfile(loaded.vocab_file, os.path.join(folder, VOCAB_FILE))
