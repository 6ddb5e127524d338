"""Reading a whole model folder, one reader per format: the model its head calls for, built and
loaded strictly, with the vocabulary and casing that travel beside the weights.

- `tf1`: `bert_model.ckpt` + `bert_config.json` + `vocab.txt`; the head from the variable names.
- `keras`: `model.ckpt` + `bert_config.json` + `vocab.txt` + `model_spec.json` (the head and label
  count, and the tokenizer's casing).
- `hf`: a Hugging Face folder (`hf/`).
- `model_garden`: an object-based `bert_model.ckpt` + `params.yaml` (or `bert_config.json`) +
  `vocab.txt` (`model_garden/`).
- `tf_hub`: a TF-Hub BERT encoder SavedModel, read as data (`tf_hub/`).
- `keras_hub`: a KerasHub BERT preset, read as data (`keras_hub/`).

`formats.FORMAT_TABLE` names the reader of each format; `folders.read_model` calls it.
"""
from __future__ import annotations

import dataclasses
import os

import keras
import tensorflow as tf

from modeling.checkpoints.errors import UnsupportedCheckpointError
from modeling.checkpoints.hf.checkpoint import VOCAB_FILE, read_hf_checkpoint
from modeling.checkpoints.keras_format.checkpoint import keras_model_spec, load_keras_checkpoint
from modeling.checkpoints.keras_hub.preset import (VOCABULARY_FILE, VOCABULARY_FOLDER,
                                                   read_keras_hub_checkpoint)
from modeling.checkpoints.model_garden.checkpoint import (read_model_garden_config,
                                                          read_model_garden_values)
from modeling.checkpoints.model_specs import (ModelSpec, build_model, detect_model_spec,
                                              read_model_spec)
from modeling.checkpoints.tf1.checkpoint import assign_tf1_values, load_tf1_checkpoint
from modeling.checkpoints.tf_hub.saved_model import read_tf_hub_values
from modeling.config import BertConfig

BERT_CONFIG_FILE = "bert_config.json"


@dataclasses.dataclass(frozen=True)
class FoundCheckpoint:
    """A checkpoint located once: its format, where it is and, for checkpoint files, the reader
    it was opened with (every later step reads through it)."""

    format: str
    # The resolved checkpoint prefix, or the folder of a folder format (hf, tf_hub).
    path: str
    # The open checkpoint; None for a folder format.
    reader: tf.train.CheckpointReader | None = None


@dataclasses.dataclass(frozen=True)
class FolderFiles:
    """What the caller says instead of the folder: files beside the checkpoint, and its head."""

    bert_config_file: str | None = None
    vocab_file: str | None = None
    # The head of a keras checkpoint that has no model_spec.json.
    head: str | None = None


@dataclasses.dataclass
class LoadedModel:
    """A model read from a checkpoint folder, with what travels beside its weights."""

    model: keras.Model
    spec: ModelSpec
    vocab_file: str
    # The tokenizer's casing where the input says it (Hugging Face, keras formats); else None.
    do_lower_case: bool | None
    # The label names by id, where the folder's model_spec.json has them (fine-tuned here).
    labels: tuple[str, ...] | None = None
    # A classifier's problem type, where model_spec.json records it (multi-label).
    problem_type: str | None = None


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


def _vocab(folder: str, files: FolderFiles, config: BertConfig, name: str = VOCAB_FILE) -> str:
    """The vocab.txt (or `name`) of the model, checked against the config's vocab_size."""
    vocab_file = _beside(folder, files.vocab_file, name, "--vocab_file")
    lines = count_vocab_lines(vocab_file)
    if lines != config.vocab_size:
        raise UnsupportedCheckpointError(
            f"vocab size mismatch: {vocab_file} has {lines} tokens, the config says "
            f"vocab_size={config.vocab_size}")
    return vocab_file


def _bert_config(folder: str, files: FolderFiles) -> BertConfig:
    return BertConfig.from_json_file(
        _beside(folder, files.bert_config_file, BERT_CONFIG_FILE, "--bert_config_file"))


def read_tf1_folder(found: FoundCheckpoint, files: FolderFiles) -> LoadedModel:
    """A TF1 checkpoint's model; its head from the variable names, its casing and label names
    from the `model_spec.json` a fine-tuning script wrote beside it."""
    folder = os.path.dirname(found.path)
    config = _bert_config(folder, files)
    vocab_file = _vocab(folder, files, config)
    spec = detect_model_spec(found.reader.get_variable_to_shape_map(), found.path)
    model = build_model(config, spec)
    load_tf1_checkpoint(model, found.path, found.reader)
    saved = read_model_spec(folder)
    if saved is None or saved.spec != spec:  # another model's, or none
        return LoadedModel(model, spec, vocab_file, None)
    return LoadedModel(model, spec, vocab_file, saved.do_lower_case, saved.labels,
                       saved.problem_type)


def read_keras_folder(found: FoundCheckpoint, files: FolderFiles) -> LoadedModel:
    """A keras checkpoint's model; its head from `model_spec.json`, else from `files.head` and
    the object graph."""
    folder = os.path.dirname(found.path)
    config = _bert_config(folder, files)
    vocab_file = _vocab(folder, files, config)
    saved = read_model_spec(folder)
    spec = saved.spec if saved and not files.head else \
        keras_model_spec(found.path, files.head, found.reader)
    model = build_model(config, spec)
    load_keras_checkpoint(model, found.path)
    same = saved is not None and saved.spec == spec
    return LoadedModel(model, spec, vocab_file, saved.do_lower_case if saved else None,
                       saved.labels if same else None, saved.problem_type if same else None)


def read_model_garden_folder(found: FoundCheckpoint, files: FolderFiles) -> LoadedModel:
    """A Model Garden checkpoint's model; its config from `params.yaml` unless given."""
    folder = os.path.dirname(found.path)
    config = (None if files.bert_config_file else read_model_garden_config(folder, found.path))
    config = config or _bert_config(folder, files)
    vocab_file = _vocab(folder, files, config)
    values = read_model_garden_values(found.path, config.num_hidden_layers, found.reader)
    spec = detect_model_spec({name: value.shape for name, value in values.items()}, found.path)
    model = build_model(config, spec)
    assign_tf1_values(model, values, f"checkpoint {found.path}")
    return LoadedModel(model, spec, vocab_file, None)


def read_hf_folder(found: FoundCheckpoint, files: FolderFiles) -> LoadedModel:
    """A Hugging Face folder's model; the vocabulary is its `vocab.txt` unless given."""
    checkpoint = read_hf_checkpoint(found.path)
    vocab_file = _vocab(found.path, files, checkpoint.config)
    model = build_model(checkpoint.config, checkpoint.spec)
    assign_tf1_values(model, checkpoint.values, found.path)
    return LoadedModel(model, checkpoint.spec, vocab_file, checkpoint.do_lower_case,
                       checkpoint.labels)


def read_tf_hub_folder(found: FoundCheckpoint, files: FolderFiles) -> LoadedModel:
    """A TF-Hub encoder SavedModel's encoder, with its masked-LM head where it was exported with
    one; the vocabulary is its `assets/vocab.txt`."""
    given = BertConfig.from_json_file(files.bert_config_file) if files.bert_config_file else None
    config, values, do_lower_case = read_tf_hub_values(found.path, given)
    vocab_file = _vocab(os.path.join(found.path, "assets"), files, config)
    spec = detect_model_spec({name: value.shape for name, value in values.items()}, found.path)
    model = build_model(config, spec)
    assign_tf1_values(model, values, found.path)
    return LoadedModel(model, spec, vocab_file, do_lower_case)


def read_keras_hub_folder(found: FoundCheckpoint, files: FolderFiles) -> LoadedModel:
    """A KerasHub preset's model: its encoder, with the classifier of a BertTextClassifier preset;
    the vocabulary is its `assets/tokenizer/vocabulary.txt` unless given."""
    checkpoint = read_keras_hub_checkpoint(found.path)
    vocab_file = _vocab(os.path.join(found.path, VOCABULARY_FOLDER), files, checkpoint.config,
                        VOCABULARY_FILE)
    model = build_model(checkpoint.config, checkpoint.spec)
    assign_tf1_values(model, checkpoint.values, found.path)
    return LoadedModel(model, checkpoint.spec, vocab_file, checkpoint.do_lower_case)
