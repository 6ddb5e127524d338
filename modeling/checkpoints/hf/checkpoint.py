"""Hugging Face BERT folders: config.json, model.safetensors, vocab.txt, tokenizer_config.json.

Reading and writing need `safetensors` and numpy only, not torch. The parameters go through the
name table of `modeling.checkpoints.hf.names`; the head follows the weights present (the config's
`architectures` only tells sequence from token classification, which share their names). Reading
is strict: parameters with no place in this project's models, untied decoder weights or a
configuration this project does not compute (another `model_type`, LayerNorm epsilon, position
embedding type) are errors that name what was found.
"""
from __future__ import annotations

import json
import logging
import os
import shutil

import keras
import numpy as np
from safetensors import SafetensorError, safe_open
from safetensors.numpy import save_file

from modeling.checkpoints.errors import CheckpointMismatchError, UnsupportedCheckpointError
from modeling.checkpoints.hf.config import (ARCHITECTURES, bert_config_from_hf, hf_config_from_bert,
                                            hf_tokenizer_config, labels_from_hf)
from modeling.checkpoints.hf.names import (BASE_PREFIX, ENCODER_ONLY, HF_BUFFERS,
                                           HF_LEGACY_SUFFIXES, HF_TIED, from_hf_arrays,
                                           to_hf_arrays)
from modeling.checkpoints.model_specs import (ModelSpec, ReadCheckpoint, detect_model_spec,
                                              model_spec)
from modeling.checkpoints.names import tf1_name_map
from modeling.checkpoints.tf1.checkpoint import assign_tf1_values
from utils.json_files import read_json_object

HF_CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX_FILE = "model.safetensors.index.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
VOCAB_FILE = "vocab.txt"
# Task classes built without a pooler: the project's models always have one.
_NO_POOLER = ("BertForQuestionAnswering", "BertForTokenClassification", "BertForMaskedLM")
_POOLER = ("bert/pooler/dense/kernel", "bert/pooler/dense/bias")


def is_hf_folder(path: str) -> bool:
    """True for a folder holding a Hugging Face `config.json`."""
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, HF_CONFIG_FILE))


def _weight_files(folder: str) -> list[str]:
    index = os.path.join(folder, WEIGHTS_INDEX_FILE)
    if os.path.isfile(index):
        shards = sorted(set(read_json_object(index).get("weight_map", {}).values()))
        return [os.path.join(folder, shard) for shard in shards]
    if os.path.isfile(os.path.join(folder, WEIGHTS_FILE)):
        return [os.path.join(folder, WEIGHTS_FILE)]
    found = ", ".join(sorted(os.listdir(folder)))
    raise FileNotFoundError(f"{folder}: no {WEIGHTS_FILE} (found: {found}); PyTorch .bin files are "
                            "not read: save the model with safetensors")


def read_safetensors(folder: str) -> dict[str, np.ndarray]:
    """Every tensor of the folder's safetensors file(s), float16 widened to float32 exactly."""
    state = {}
    for path in _weight_files(folder):
        with safe_open(path, framework="numpy") as f:
            for name in f.keys():
                dtype = f.get_slice(name).get_dtype()
                if dtype not in ("F32", "F16", "I64"):
                    raise UnsupportedCheckpointError(
                        f"{path}: {name} has dtype {dtype}; only F32 and F16 are read")
                state[name] = f.get_tensor(name)
    return state


def _canonical_state(state: dict[str, np.ndarray], source: str) -> dict[str, np.ndarray]:
    """Renames legacy LayerNorm names; checks and drops tied copies; drops buffers."""
    renamed = {}
    for name, value in state.items():
        for old, new in HF_LEGACY_SUFFIXES:
            if name.endswith(old):
                name = name[:-len(old)] + new
        renamed[name] = value
    for copy, original in HF_TIED:
        if copy in renamed and original in renamed:
            if not np.array_equal(renamed[copy], renamed[original]):
                raise UnsupportedCheckpointError(
                    f"{source}: {copy} differs from {original}; this project ties them")
            del renamed[copy]
    return {name: value.astype(np.float32) for name, value in renamed.items()
            if not HF_BUFFERS.match(name)}


def _architecture(state: dict[str, np.ndarray], hf_config: dict, source: str) -> str:
    """The Hugging Face class whose parameters `state` holds."""
    names = set(state)
    if any(n.startswith("cls.seq_relationship.") for n in names):
        return "BertForPreTraining"
    if any(n.startswith("cls.") for n in names):
        return "BertForMaskedLM"
    if any(n.startswith("qa_outputs.") for n in names):
        return "BertForQuestionAnswering"
    if any(n.startswith("classifier.") for n in names):
        declared = hf_config.get("architectures") or []
        for architecture in ("BertForSequenceClassification", "BertForTokenClassification"):
            if architecture in declared:
                return architecture
        raise UnsupportedCheckpointError(
            f"{source}: `classifier` weights with architectures {declared}; supported: "
            "BertForSequenceClassification, BertForTokenClassification")
    return ENCODER_ONLY


def _with_prefix(state: dict[str, np.ndarray], architecture: str) -> dict[str, np.ndarray]:
    """Names as `architecture` saves them: `bert.` on the encoder of task classes only."""
    def base(name):
        return name[len(BASE_PREFIX):] if name.startswith(BASE_PREFIX) else name

    if architecture == ENCODER_ONLY:
        return {base(n): v for n, v in state.items()}
    encoder_roots = ("embeddings", "encoder", "pooler")
    return {BASE_PREFIX + base(n) if base(n).split(".")[0] in encoder_roots else n: v
            for n, v in state.items()}


def read_hf_checkpoint(folder: str) -> ReadCheckpoint:
    """Reads a Hugging Face BERT folder into original-named arrays, its config and its head.

    A `BertForQuestionAnswering`, `BertForTokenClassification` or `BertForMaskedLM` file has no
    pooler: the pooler is then zero (those heads never read it), and a warning says so.

    Raises:
        UnsupportedCheckpointError: not BERT, or parameters this project has no place for.
        FileNotFoundError: the folder has no safetensors weights.
    """
    hf_config = read_json_object(os.path.join(folder, HF_CONFIG_FILE))
    config = bert_config_from_hf(hf_config, source=os.path.join(folder, HF_CONFIG_FILE))
    state = _canonical_state(read_safetensors(folder), folder)
    architecture = _architecture(state, hf_config, folder)
    try:
        values = from_hf_arrays(_with_prefix(state, architecture), architecture,
                                config.num_hidden_layers)
    except ValueError as error:
        raise UnsupportedCheckpointError(f"{folder}: {error}") from None
    if architecture in _NO_POOLER and not any(name in values for name in _POOLER):
        logging.warning("%s: %s has no pooler; the pooler is set to zero (that head does not "
                        "use it)", folder, architecture)
        values[_POOLER[0]] = np.zeros([config.hidden_size] * 2, np.float32)
        values[_POOLER[1]] = np.zeros([config.hidden_size], np.float32)
    spec = detect_model_spec({name: value.shape for name, value in values.items()}, folder)
    tokenizer_config = os.path.join(folder, TOKENIZER_CONFIG_FILE)
    do_lower_case = (read_json_object(tokenizer_config).get("do_lower_case")
                     if os.path.isfile(tokenizer_config) else None)
    return ReadCheckpoint(config, spec, values, do_lower_case,
                          labels_from_hf(hf_config, spec.num_labels))


def load_hf_checkpoint(model: keras.Model, folder: str) -> list[str]:
    """Assigns a Hugging Face folder's weights to a built model, all or nothing.

    Returns the original names of the folder's weights the model did not use (e.g. the heads,
    when `model` is an encoder); they are also logged.

    Raises:
        CheckpointMismatchError: the activation differs from the model's config, or a variable
            is missing or has another shape.
    """
    checkpoint = read_hf_checkpoint(folder)
    if checkpoint.config.hidden_act.lower() != model.config.hidden_act.lower():
        raise CheckpointMismatchError(
            f"{folder} computes hidden_act={checkpoint.config.hidden_act!r}, the model "
            f"hidden_act={model.config.hidden_act!r}")
    return assign_tf1_values(model, checkpoint.values, folder)


def check_hf_writable(spec: ModelSpec) -> None:
    """Raises UnsupportedCheckpointError for a head no Hugging Face BERT class holds."""
    if spec.head not in ARCHITECTURES:
        raise UnsupportedCheckpointError(
            f"the {spec.head} head has no Hugging Face BERT class; heads written: "
            f"{', '.join(ARCHITECTURES)}")


def write_hf_checkpoint(model: keras.Model, folder: str, vocab_file: str, do_lower_case: bool,
                        labels: tuple[str, ...] | None = None) -> None:
    """Writes a built model as a Hugging Face folder (into an existing folder).

    `transformers` loads it with the class of `ARCHITECTURES` for the model's head; a fine-tuned
    head's `labels` become `id2label`.
    """
    spec = model_spec(model)
    check_hf_writable(spec)
    values = {name: variable.numpy() for name, variable in tf1_name_map(model).items()}
    architecture = ARCHITECTURES[spec.head]
    state = to_hf_arrays(values, architecture, model.config.num_hidden_layers)
    weights = os.path.join(folder, WEIGHTS_FILE)
    try:
        save_file(state, weights, metadata={"format": "pt"})
    except SafetensorError as error:  # the system's refusal (a full disk), as an OSError
        raise OSError(f"writing {weights} failed: {error}") from None
    files = {HF_CONFIG_FILE: hf_config_from_bert(model.config, spec, labels),
             TOKENIZER_CONFIG_FILE: hf_tokenizer_config(model.config, do_lower_case)}
    for name, content in files.items():
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            json.dump(content, f, indent=2, sort_keys=True)
            f.write("\n")
    shutil.copyfile(vocab_file, os.path.join(folder, VOCAB_FILE))
