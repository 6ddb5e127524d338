"""The three folder formats a BERT model travels in, read into a built model and written from one.

- `tf1`: Google's original name-based checkpoint `bert_model.ckpt` + `bert_config.json` +
  `vocab.txt`, as released and as the original scripts read it.
- `keras`: this project's object-based checkpoint `model.ckpt` + `bert_config.json` +
  `vocab.txt` + `model_spec.json` (the head and label count, and the tokenizer's casing).
- `hf`: a Hugging Face folder (`modeling.checkpoints.hf`).

Every reader builds the model the checkpoint's head calls for and loads it strictly; every writer
checks what it can before writing, writes into a temporary folder beside the target and renames
it into place, so a failed conversion leaves nothing behind.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import tempfile
from typing import Iterator

import keras
import tensorflow as tf

from modeling.config import BertConfig
from modeling.checkpoints.heads import (ENCODER, ModelSpec, UnsupportedCheckpointError,
                                      build_model, detect_model_spec, model_spec)
from modeling.checkpoints.hf import (VOCAB_FILE, check_hf_writable,
                                    is_hf_folder, read_hf_checkpoint, write_hf_checkpoint)
from modeling.checkpoints.project import (is_project_checkpoint, load_project_checkpoint,
                                         save_project_checkpoint)
from modeling.checkpoints.tf1 import (assign_tf1_values, load_tf1_checkpoint,
                                     resolve_checkpoint_prefix,
                                     save_tf1_checkpoint)

TF1, KERAS, HF = "tf1", "keras", "hf"
FORMATS = (TF1, KERAS, HF)
DESCRIPTIONS = {TF1: "original TF1 (name-based) checkpoint",
                KERAS: "project (TF2 object-based) checkpoint",
                HF: "Hugging Face folder"}
CONFIG_FILE = "bert_config.json"
SPEC_FILE = "model_spec.json"
TF1_PREFIX = "bert_model.ckpt"
KERAS_PREFIX = "model.ckpt"
# Where the head lives in a project checkpoint's object graph.
_KERAS_HEAD_KEY = "model/{}/.ATTRIBUTES/VARIABLE_VALUE"


@dataclasses.dataclass
class LoadedModel:
    """A model read from a checkpoint folder, with what travels beside its weights."""

    model: keras.Model
    spec: ModelSpec
    vocab_file: str
    # The tokenizer's casing where the input says it (Hugging Face, keras formats); else None.
    do_lower_case: bool | None


def detect_format(path: str) -> str:
    """`hf` for a folder with `config.json`, else `keras` or `tf1` by the checkpoint's kind."""
    if is_hf_folder(path):
        return HF
    return KERAS if is_project_checkpoint(resolve_checkpoint_prefix(path)) else TF1


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


def _keras_spec(prefix: str, head: str | None) -> ModelSpec:
    """The spec of a project checkpoint without `model_spec.json`, from its object graph."""
    shapes = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    weights = shapes.get(_KERAS_HEAD_KEY.format("head/output_weights"))
    if head is None:
        if _KERAS_HEAD_KEY.format("masked_lm/output_bias") in shapes:
            head = "pretraining"
        elif weights is None:
            head = ENCODER
        elif _KERAS_HEAD_KEY.format("head/output_bias") not in shapes:
            head = "multiple_choice"
        else:
            raise UnsupportedCheckpointError(
                f"{prefix}: its head may be a classifier, a span labeler or a token classifier "
                f"and {SPEC_FILE} is absent; pass --head")
    takes_labels = head in ("classifier", "token_classifier")
    return ModelSpec(head, int(weights[0]) if takes_labels and weights else None)


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
        CheckpointMismatchError, ProjectCheckpointMismatchError: weights that do not fit.
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
    prefix = resolve_checkpoint_prefix(path)
    folder = os.path.dirname(prefix)
    config = BertConfig.from_json_file(
        _beside(folder, bert_config_file, CONFIG_FILE, "--bert_config_file"))
    vocab = _beside(folder, vocab_file, VOCAB_FILE, "--vocab_file")
    _check_vocab(vocab, config)
    if input_format == TF1:
        shapes = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
        spec, do_lower_case = detect_model_spec(shapes, prefix), None
        model = build_model(config, spec)
        load_tf1_checkpoint(model, prefix)
    else:
        saved = _read_spec_file(os.path.join(folder, SPEC_FILE))
        spec = ModelSpec.from_dict(saved) if saved and not head else _keras_spec(prefix, head)
        do_lower_case = saved.get("do_lower_case") if saved else None
        model = build_model(config, spec)
        load_project_checkpoint(model, prefix)
    return LoadedModel(model, spec, vocab, do_lower_case)


def _read_spec_file(path: str) -> dict | None:
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def check_output_folder(output: str) -> None:
    """Raises FileExistsError unless `output` is absent or an empty folder."""
    if os.path.exists(output) and not (os.path.isdir(output) and not os.listdir(output)):
        raise FileExistsError(f"output {output} exists and is not an empty folder")


@contextlib.contextmanager
def atomic_output_folder(output: str) -> Iterator[str]:
    """Yields a temporary folder beside `output`, renamed to `output` when the block succeeds.

    On any error the temporary folder is removed and `output` is left as it was.
    """
    check_output_folder(output)
    parent = os.path.dirname(os.path.abspath(output))
    os.makedirs(parent, exist_ok=True)
    temp = tempfile.mkdtemp(dir=parent, prefix=f".{os.path.basename(output)}.tmp-")
    try:
        yield temp
        _set_default_permissions(temp)
        if os.path.isdir(output):
            os.rmdir(output)
        os.rename(temp, output)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise


def _set_default_permissions(folder: str) -> None:
    """Gives a temporary folder and its files the modes the umask gives new ones."""
    umask = os.umask(0o022)
    os.umask(umask)
    for root, _, files in os.walk(folder):
        os.chmod(root, 0o777 & ~umask)
        for name in files:
            os.chmod(os.path.join(root, name), 0o666 & ~umask)


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
    if output_format == HF:
        check_hf_writable(loaded.spec)
    if model_spec(loaded.model) != loaded.spec:
        raise ValueError(f"the model is a {model_spec(loaded.model)}, not a {loaded.spec}")
    with atomic_output_folder(output) as folder:
        if output_format == HF:
            write_hf_checkpoint(loaded.model, folder, loaded.vocab_file, do_lower_case)
        else:
            if output_format == TF1:
                save_tf1_checkpoint(loaded.model, os.path.join(folder, TF1_PREFIX))
            else:
                _save_keras(loaded.model, folder, loaded.spec, do_lower_case)
            loaded.model.config.to_json_file(os.path.join(folder, CONFIG_FILE))
            shutil.copyfile(loaded.vocab_file, os.path.join(folder, VOCAB_FILE))
