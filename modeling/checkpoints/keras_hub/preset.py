"""KerasHub BERT presets: `config.json` + `model.weights.h5` + `tokenizer.json` +
`assets/tokenizer/vocabulary.txt` + `metadata.json`, and a task's `task.json` + `task.weights.h5`
(+ `preprocessor.json`), as KerasHub 0.32's `save_to_preset` writes them and its `from_preset`
loads them.

A preset is read as data: its JSON files as JSON (`keras_hub.config`), its weights with h5py
(`keras_hub.weights`), never through `keras_hub` nor by deserializing the Keras objects its files
describe (a config can name any class). The weights go through the name table of
`keras_hub.names` and the strict assignment: every variable mapped once, shapes checked, what is
left over named. Where the models differ:

- The encoder is KerasHub's `BertBackbone`, variable for variable; it computes what the original
  computes for `hidden_act: "gelu"` (GELU's tanh approximation, LayerNorm epsilon 1e-12). A model
  with another activation is refused: BertBackbone's config cannot name one.
- The classifier is `BertTextClassifier` (pooled output, dropout 0.1, dense `logits`: the
  original's `output_weights` transposed and `output_bias`); the label count is the head's.
- The pretraining heads have no faithful place: KerasHub has no next-sentence head, and KerasHub
  0.32's `BertMaskedLM` computes its masked-LM transform with exact (erf) GELU and LayerNorm epsilon
  1e-5 whatever the backbone computes, where the original uses `hidden_act` and 1e-12 (on the
  original's tiny fixture its log-probabilities differ from the original's by 1.3e-3). They are
  dropped, with a warning, and the encoder is written; a `BertMaskedLM` preset is read as its
  encoder, its head left out with a warning, for the same reason.
- SQuAD, token-classifier and multiple-choice heads have no KerasHub BERT task: refused before
  anything is written.
"""
from __future__ import annotations

import json
import logging
import os
import shutil

import keras
import numpy as np

from modeling.checkpoints.errors import CheckpointMismatchError, UnsupportedCheckpointError
from modeling.checkpoints.keras_hub.config import (CLASSIFIER, HIDDEN_ACT, MASKED_LM,
                                                   backbone_config, bert_config_from_backbone,
                                                   check_activation, classifier_preprocessor,
                                                   classifier_task, do_lower_case_from_tokenizer,
                                                   metadata, task_head, tokenizer_config)
from modeling.checkpoints.keras_hub.names import (CLASSIFIER_GROUPS, CLASSIFIER_OPTIMIZER_VALUES,
                                                  MASKED_LM_HEAD_GROUP, OPTIMIZER_GROUP,
                                                  backbone_groups, classifier_rows, encoder_rows)
from modeling.checkpoints.keras_hub.weights import (WeightsFile, read_weights_file,
                                                    write_weights_file)
from modeling.checkpoints.model_garden.names import (HEADS_BIAS, HEADS_IN, HEADS_OUT, TRANSPOSE,
                                                     to_model_garden, to_original)
from modeling.checkpoints.model_specs import ModelSpec, ReadCheckpoint, model_spec
from modeling.checkpoints.names import tf1_name_map
from modeling.checkpoints.tf1.checkpoint import assign_tf1_values
from utils.json_files import read_json_object

CONFIG_FILE, WEIGHTS_FILE = "config.json", "model.weights.h5"
TASK_FILE, TASK_WEIGHTS_FILE = "task.json", "task.weights.h5"
TOKENIZER_FILE, PREPROCESSOR_FILE, METADATA_FILE = ("tokenizer.json", "preprocessor.json",
                                                    "metadata.json")
VOCABULARY_FOLDER, VOCABULARY_FILE = os.path.join("assets", "tokenizer"), "vocabulary.txt"
# KerasHub's BertTokenizer refuses a vocabulary without these.
SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]")
WRITTEN_HEADS = ("encoder", "classifier", "pretraining", "masked_lm")
# Why a head's variables are dropped, by the prefix of their original names.
DROPPED = {
    "cls/seq_relationship/": "KerasHub has no next-sentence head",
    "cls/predictions/": "KerasHub's BertMaskedLM computes its transform with exact (erf) GELU "
                        "and LayerNorm epsilon 1e-5, the original with hidden_act and 1e-12",
}
_DIMENSIONS = {HEADS_IN: 3, HEADS_BIAS: 2, HEADS_OUT: 3, TRANSPOSE: 2}


def is_keras_hub_folder(path: str) -> bool:
    """True for a folder whose config.json is a Keras serialization (`registered_name`), as
    KerasHub tells its presets from Hugging Face folders."""
    config = os.path.join(path, CONFIG_FILE)
    if not (os.path.isdir(path) and os.path.isfile(config)):
        return False
    try:
        return "registered_name" in read_json_object(config)
    except ValueError:
        return False


def _take(weights: WeightsFile, rows, layer_names: dict[str, str], source: str
          ) -> dict[str, np.ndarray]:
    """{original name: array} of the rows' datasets, each removed from `weights.arrays` once; a
    dataset absent from the file is left to the strict assignment to name."""
    values = {}
    for tf1, path, reshape in rows:
        if path not in weights.arrays:
            continue
        group = path.rsplit("/vars/", 1)[0] if "/vars/" in path else ""
        if weights.layer_names.get(group) != layer_names[group]:
            raise UnsupportedCheckpointError(
                f"{source}: {group} holds the layer {weights.layer_names.get(group)!r} where "
                f"KerasHub 0.32 keeps {layer_names[group]!r}: not KerasHub 0.32's layout")
        value = weights.arrays.pop(path)
        if reshape in _DIMENSIONS and value.ndim != _DIMENSIONS[reshape]:
            raise CheckpointMismatchError(f"{source}: {path} ({tf1}) has shape {value.shape}")
        values[tf1] = np.ascontiguousarray(to_original(value, reshape))
    return values


def _left_over(weights: WeightsFile, source: str, skipped: str | None = None) -> None:
    """Refuses datasets no row took, but an optimizer's and those below the group `skipped`."""
    skip = (OPTIMIZER_GROUP + "/",) + ((skipped + "/",) if skipped else ())
    left = sorted(path for path in weights.arrays if not path.startswith(skip))
    if left:
        raise UnsupportedCheckpointError(
            f"{source}: {len(left)} variables with no place in this project's models: "
            + ", ".join(left))


def _task(folder: str, task: dict, backbone: dict) -> tuple[ModelSpec, dict[str, np.ndarray]]:
    """The head of a task.json over the backbone of config.json, and its task.weights.h5 values."""
    path = os.path.join(folder, TASK_WEIGHTS_FILE)
    head = task_head(task, backbone, os.path.join(folder, TASK_FILE))
    if head != CLASSIFIER:
        if head == MASKED_LM:
            logging.warning("%s: BertMaskedLM's head is left out (%s); the encoder is read",
                            folder, DROPPED["cls/predictions/"])
        if os.path.isfile(path):
            _left_over(read_weights_file(path), path, skipped=MASKED_LM_HEAD_GROUP)
        return ModelSpec("encoder"), {}
    if not os.path.isfile(path):
        raise UnsupportedCheckpointError(
            f"{folder}: a BertTextClassifier without {TASK_WEIGHTS_FILE}")
    weights = read_weights_file(path)
    values = _take(weights, classifier_rows(), dict(CLASSIFIER_GROUPS), path)
    _left_over(weights, path)
    num_labels = (task.get("config") or {}).get("num_classes")
    if not isinstance(num_labels, int) or isinstance(num_labels, bool) or num_labels < 1:
        raise UnsupportedCheckpointError(f"{folder}: task.json has num_classes={num_labels!r}")
    if "output_weights" in values and values["output_weights"].shape[0] != num_labels:
        raise UnsupportedCheckpointError(
            f"{path}: {values['output_weights'].shape[0]} labels, task.json says {num_labels}")
    return ModelSpec("classifier", num_labels=num_labels), values


def read_keras_hub_checkpoint(folder: str) -> ReadCheckpoint:
    """Reads a KerasHub BERT preset into original-named arrays, its config, head and casing.

    Raises:
        UnsupportedCheckpointError: not a BertBackbone, settings or variables this project does not
            compute, a task without a place here.
        FileNotFoundError: no model.weights.h5 (sharded presets are not read).
    """
    backbone = read_json_object(os.path.join(folder, CONFIG_FILE), "KerasHub config")
    config = bert_config_from_backbone(backbone, os.path.join(folder, CONFIG_FILE))
    path = os.path.join(folder, WEIGHTS_FILE)
    if not os.path.isfile(path):
        found = ", ".join(sorted(os.listdir(folder)))
        raise FileNotFoundError(f"{folder}: no {WEIGHTS_FILE} (found: {found}); sharded presets "
                                "are not read")
    weights = read_weights_file(path)
    layers = config.num_hidden_layers
    values = _take(weights, encoder_rows(layers), backbone_groups(layers), path)
    _left_over(weights, path)
    spec = ModelSpec("encoder")
    if os.path.isfile(os.path.join(folder, TASK_FILE)):
        spec, head = _task(folder, read_json_object(os.path.join(folder, TASK_FILE)), backbone)
        values.update(head)
    tokenizer = os.path.join(folder, TOKENIZER_FILE)
    do_lower_case = (do_lower_case_from_tokenizer(read_json_object(tokenizer), tokenizer)
                     if os.path.isfile(tokenizer) else None)
    return ReadCheckpoint(config, spec, values, do_lower_case)


def load_keras_hub_checkpoint(model: keras.Model, folder: str) -> list[str]:
    """Assigns a KerasHub preset's weights to a built model, all or nothing; returns (and logs)
    the original names of the preset's weights the model did not use.

    Raises:
        CheckpointMismatchError: the model's activation is not BertBackbone's, or a variable is
            missing or has another shape.
    """
    checkpoint = read_keras_hub_checkpoint(folder)
    if model.config.hidden_act.lower() != HIDDEN_ACT:
        raise CheckpointMismatchError(
            f"{folder} computes hidden_act={HIDDEN_ACT!r} (KerasHub's BertBackbone: GELU's tanh "
            f"approximation), the model hidden_act={model.config.hidden_act!r}")
    return assign_tf1_values(model, checkpoint.values, folder)


def check_keras_hub_writable(model: keras.Model, vocab_file: str) -> None:
    """Raises UnsupportedCheckpointError for what a KerasHub preset cannot hold: a head without a
    KerasHub BERT task, an activation BertBackbone does not compute, a vocabulary without the
    special tokens KerasHub's BertTokenizer needs."""
    spec = model_spec(model)
    if spec.head not in WRITTEN_HEADS:
        raise UnsupportedCheckpointError(
            f"the {spec.head} head has no place in KerasHub's BERT models (BertBackbone holds an "
            "encoder, BertTextClassifier a classifier); nothing was written")
    check_activation(model.config)
    with open(vocab_file, encoding="utf-8") as f:
        tokens = {line.rstrip() for line in f}
    missing = [token for token in SPECIAL_TOKENS if token not in tokens]
    if missing:
        raise UnsupportedCheckpointError(
            f"{vocab_file} lacks {', '.join(missing)}, which KerasHub's BertTokenizer needs")


def _warn_dropped(names: list[str]) -> None:
    for prefix, reason in DROPPED.items():
        dropped = [name for name in names if name.startswith(prefix)]
        if dropped:
            logging.warning("not written to the KerasHub preset: %s (%s); the encoder is written "
                            "as BertBackbone", ", ".join(dropped), reason)


def write_keras_hub_preset(model: keras.Model, folder: str, vocab_file: str,
                           do_lower_case: bool) -> None:
    """Writes a built model as a KerasHub preset (into an existing folder): the encoder as
    `BertBackbone`, a classifier as `BertTextClassifier`; pretraining heads are dropped with a
    warning. `BertBackbone.from_preset(folder)` (or the task's class) loads it."""
    check_keras_hub_writable(model, vocab_file)
    spec, config = model_spec(model), model.config
    values = {name: variable.numpy() for name, variable in tf1_name_map(model).items()}
    heads = config.num_attention_heads

    def arrays(rows):
        return {path: to_model_garden(values.pop(tf1), reshape, heads)
                for tf1, path, reshape in rows}

    backbone = backbone_config(config)
    weights = arrays(encoder_rows(config.num_hidden_layers))
    write_weights_file(os.path.join(folder, WEIGHTS_FILE),
                       backbone_groups(config.num_hidden_layers), weights)
    files = {CONFIG_FILE: backbone, TOKENIZER_FILE: tokenizer_config(do_lower_case),
             METADATA_FILE: metadata(sum(value.size for value in weights.values()))}
    if spec.head == "classifier":
        task_weights = arrays(classifier_rows()) | CLASSIFIER_OPTIMIZER_VALUES
        write_weights_file(os.path.join(folder, TASK_WEIGHTS_FILE), dict(CLASSIFIER_GROUPS),
                           task_weights)
        files[PREPROCESSOR_FILE] = classifier_preprocessor(do_lower_case,
                                                           config.max_position_embeddings)
        files[TASK_FILE] = classifier_task(backbone, files[PREPROCESSOR_FILE], spec.num_labels)
    _warn_dropped(sorted(values))
    for name, content in files.items():
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            f.write(json.dumps(content, indent=4) + "\n")
    os.makedirs(os.path.join(folder, VOCABULARY_FOLDER))
    shutil.copyfile(vocab_file, os.path.join(folder, VOCABULARY_FOLDER, VOCABULARY_FILE))
