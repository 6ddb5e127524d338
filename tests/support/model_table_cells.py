"""The table's cells made real: the rows' models on disk, the commands' inputs, every cell of some
columns run (each script once, `tests.support.script_runner`), and what a cell must have done.

`tests/support/model_table.py` says what each cell must do; the tests
`tests/scripts/test_model_table_*.py` check the outputs of the cells that work against the models
the rows were written from.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
from typing import Sequence

import numpy as np

from tests.support.model_table import (CLASSIFIER, FIXTURES, MASKED_LM, MAX_SEQ_LENGTH,
                                       PRETRAINING, ROWS, SIZES, SQUAD, TAGGER, TEXTS, VOCAB,
                                       Column, Refusal, Row, cell_arguments, cell_output)
from tests.support.script_errors import TRACEBACK, assert_user_error
from tests.support.script_runner import run_cells


def write_vocab(path: str) -> str:
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(token + "\n" for token in VOCAB))
    return path


def write_inputs(folder: str) -> str:
    """The commands' input files in `folder`: a text file per task, tiny pretraining records for
    the vocabulary and length 16, and a two-example RTE training set."""
    import tensorflow as tf
    from tests.support.tf_examples import example

    os.makedirs(os.path.join(folder, "rte"), exist_ok=True)
    for name, texts in TEXTS.items():
        with open(os.path.join(folder, name + ".txt"), "w", encoding="utf-8") as f:
            f.write("".join(text + "\n" for text in texts))
    with open(os.path.join(folder, "rte", "train.tsv"), "w", encoding="utf-8") as f:
        f.write("index\tsentence1\tsentence2\tlabel\n0\tw1 w2 w3\tw4 w5\tentailment\n"
                "1\tw6 w7\tw8 w9 w10\tnot_entailment\n")
    rng = np.random.default_rng(3)
    position = np.arange(MAX_SEQ_LENGTH)
    masked = np.array([2, 7, 0])   # the third slot is padding (weight 0)
    with tf.io.TFRecordWriter(os.path.join(folder, "pretraining.tfrecord")) as writer:
        for label in (0, 1):
            # [CLS] 4 tokens [SEP] 3 tokens [SEP], padded to 16.
            ids = np.zeros(MAX_SEQ_LENGTH, np.int64)
            ids[:10] = [2, *rng.integers(5, len(VOCAB), 4), 3, *rng.integers(5, len(VOCAB), 3), 3]
            masked_ids = np.where(masked > 0, ids[masked], 0)
            ids[masked[:2]] = VOCAB.index("[MASK]")
            writer.write(example({
                "input_ids": ids, "input_mask": (position < 10).astype(int),
                "segment_ids": ((position >= 6) & (position < 10)).astype(int),
                "masked_lm_positions": masked, "masked_lm_ids": masked_ids,
                "masked_lm_weights": np.array([1.0, 1.0, 0.0]),
                "next_sentence_labels": [label]}).SerializeToString())
    return folder


# ---- The models of the rows.

@dataclasses.dataclass
class BuiltRow:
    """A row's model on disk, and the reference the cells are checked against."""

    row: Row
    # What a user passes to the scripts.
    path: str
    # The model the row was written from (hf, fixtures: the same files read by the project).
    model: object
    vocab_file: str
    # The label names the commands must give (ids as strings where the model has none).
    label_names: tuple[str, ...] | None
    # sentence-transformers: its pooling and normalisation.
    pooling: str = "cls"
    normalize: bool = False


def _randomise(model, rng: np.random.Generator) -> None:
    """Every weight random (LayerNorm scales around 1), so that a weight put in another's place,
    even a bias or a LayerNorm offset, changes the outputs."""
    for variable in model.weights:
        value = rng.normal(0.0, 0.2, variable.shape)
        variable.assign((value + 1.0 if variable.path.endswith("gamma") else value)
                        .astype(np.float32))


def _project_row(row: Row, folder: str, vocab_file: str, seed: int) -> BuiltRow:
    from modeling.checkpoints import LoadedModel, ModelSpec, build_model, write_model
    from modeling.config import BertConfig

    spec = ModelSpec(row.head, row.num_labels)
    model = build_model(BertConfig(**SIZES), spec)
    _randomise(model, np.random.default_rng(seed))
    write_model(LoadedModel(model, spec, vocab_file, True, row.labels), row.kind, folder,
                do_lower_case=True)
    path = os.path.join(folder, "bert_model.ckpt") if row.kind == "tf1" else folder
    names = row.labels or (tuple(str(i) for i in range(row.num_labels))
                           if row.num_labels else None)
    return BuiltRow(row, path, model, vocab_file, names)


def _hf_row(row: Row, folder: str, vocab_file: str, seed: int) -> BuiltRow:
    """A folder written by transformers' own `save_pretrained`, as a user has one."""
    import torch
    import transformers
    from modeling.checkpoints import read_model

    labels = {"id2label": dict(enumerate(row.labels)),
              "label2id": {label: i for i, label in enumerate(row.labels)}} if row.labels else {}
    config = transformers.BertConfig(hidden_act="gelu", initializer_range=0.2, **SIZES, **labels)
    torch.manual_seed(seed)
    model = getattr(transformers, row.source)(config)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            parameter.normal_(1.0 if name.endswith("LayerNorm.weight") else 0.0, 0.2)
    model.save_pretrained(folder, safe_serialization=True)
    transformers.BertTokenizer(vocab_file, do_lower_case=True).save_pretrained(folder)
    # transformers 5 saves tokenizer.json alone; Hugging Face's BERT repositories have vocab.txt.
    shutil.copyfile(vocab_file, os.path.join(folder, "vocab.txt"))
    if row.kind == "sentence_transformers":
        _make_sentence_transformers(folder)
    return BuiltRow(row, folder, read_model(folder).model, os.path.join(folder, "vocab.txt"),
                    row.labels, *(("mean", True) if row.kind == "sentence_transformers"
                                  else ()))


def _make_sentence_transformers(folder: str) -> None:
    """Adds what sentence-transformers saves beside the transformer: mean pooling, Normalize."""
    modules = [{"idx": index, "name": str(index), "path": path,
                "type": f"sentence_transformers.models.{kind}"}
               for index, (path, kind) in enumerate([("", "Transformer"), ("1_Pooling", "Pooling"),
                                                     ("2_Normalize", "Normalize")])]
    with open(os.path.join(folder, "modules.json"), "w", encoding="utf-8") as f:
        json.dump(modules, f)
    os.makedirs(os.path.join(folder, "1_Pooling"))
    os.makedirs(os.path.join(folder, "2_Normalize"))
    modes = ("cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens")
    with open(os.path.join(folder, "1_Pooling", "config.json"), "w", encoding="utf-8") as f:
        json.dump({"word_embedding_dimension": SIZES["hidden_size"],
                   **{f"pooling_mode_{mode}": mode == "mean_tokens" for mode in modes}}, f)
    with open(os.path.join(folder, "sentence_bert_config.json"), "w", encoding="utf-8") as f:
        json.dump({"max_seq_length": MAX_SEQ_LENGTH, "do_lower_case": False}, f)


def _fixture_row(row: Row) -> BuiltRow:
    from modeling.checkpoints import read_model

    path = str(FIXTURES / row.source)
    loaded = read_model(path)
    return BuiltRow(row, path, loaded.model, loaded.vocab_file, None)


def build_rows(folder: str) -> dict[str, BuiltRow]:
    """Every row's model, written under `folder` (the fixtures stay where they are)."""
    os.makedirs(folder)
    vocab_file = write_vocab(os.path.join(folder, "vocab.txt"))
    built = {}
    for seed, row in enumerate(ROWS):
        target = os.path.join(folder, row.name)
        if row.kind in ("tf1", "keras"):
            built[row.name] = _project_row(row, target, vocab_file, seed)
        elif row.kind in ("hf", "sentence_transformers"):
            built[row.name] = _hf_row(row, target, vocab_file, seed)
        else:
            built[row.name] = _fixture_row(row)
    return built


@dataclasses.dataclass(frozen=True)
class CellResult:
    """What a cell's command did."""

    status: int
    stdout: str
    stderr: str
    # The file or folder it writes.
    output: str
    arguments: tuple[str, ...]


def run_columns(columns: Sequence[Column], built: dict[str, BuiltRow], inputs: str, work: str,
                rows: Sequence[str] | None = None) -> dict[tuple[str, str], CellResult]:
    """Runs the cells of `columns` (for `rows`, default all), each script once for all its cells.

    Returns:
        {(column name, row name): its result}.
    """
    by_script: dict[str, dict[str, list[str]]] = {}
    outputs = {}
    for column in columns:
        for name in rows or built:
            cell_dir = os.path.join(work, column.name, name)
            os.makedirs(cell_dir)
            by_script.setdefault(column.script, {})[f"{column.name}/{name}"] = \
                cell_arguments(column, built[name].path, cell_dir, inputs)
            outputs[column.name, name] = cell_output(column, cell_dir)
    results = {}
    for script, cells in by_script.items():
        for cell, result in run_cells(script, cells, work).items():
            column, name = cell.split("/")
            results[column, name] = CellResult(result["status"], result["stdout"],
                                               result["stderr"], outputs[column, name],
                                               tuple(cells[cell]))
    return results


def check_outcome(result: CellResult, refusal: Refusal | None) -> None:
    """A cell that must be refused printed one `error:` line naming the cause, exited with 1 and
    wrote nothing; one that must work exited with 0, without a traceback."""
    if refusal is None:
        assert result.status == 0 and TRACEBACK not in result.stderr, (
            f"expected to work; exit status {result.status}:\n{result.stderr[-4000:]}")
        return
    assert result.status == 1, (f"expected the refusal {refusal.cause!r}; exit status "
                                f"{result.status}:\n{result.stderr[-4000:]}")
    assert_user_error(result.stderr, refusal.cause)
    assert not os.path.exists(result.output), f"{result.output} was written"


@dataclasses.dataclass
class Table:
    """Some columns of the table, run: the rows' models and each cell's result."""

    built: dict[str, BuiltRow]
    results: dict[tuple[str, str], CellResult]
    work: str


def make_table(work: str, runs: Sequence[tuple[Sequence[Column], Sequence[str] | None]]
               ) -> Table:
    """Builds every row under `work` and runs the cells of each (columns, rows) of `runs` (rows
    None: every row)."""
    built = build_rows(os.path.join(work, "models"))
    inputs = write_inputs(os.path.join(work, "inputs"))
    results = {}
    for columns, rows in runs:
        results.update(run_columns(columns, built, inputs, os.path.join(work, "cells"), rows))
    return Table(built, results, work)


def tokenizer_of(built: BuiltRow):
    from data.tokenization import FullTokenizer
    return FullTokenizer(built.vocab_file, do_lower_case=True)


def weights(model) -> dict[str, np.ndarray]:
    """{original TF1 name: value} of every weight of a model."""
    from modeling.checkpoints.names import tf1_name_map
    return {name: variable.numpy() for name, variable in tf1_name_map(model).items()}


def hf_head_logits(built: BuiltRow, hf_outputs: dict, arrays: dict
                   ) -> list[tuple[np.ndarray, np.ndarray]]:
    """(ours, transformers') logits of the row's head on `arrays`, where it has one: `built`'s
    model against `hf_outputs` (`tests.support.hf_reference.run_hf`) of a transformers model."""
    head = built.row.head
    if head in (MASKED_LM, PRETRAINING):
        positions = np.tile(np.arange(1, 4, dtype=np.int32), (len(arrays["input_ids"]), 1))
        ours = built.model({**arrays, "masked_lm_positions": positions}, training=False)
        logits = hf_outputs["prediction_logits" if head == PRETRAINING else "logits"]
        pairs = [(ours["masked_lm_logits"].numpy().reshape(logits[:, 1:4].shape),
                  logits[:, 1:4])]
        if head == PRETRAINING:
            pairs.append((ours["next_sentence_logits"].numpy(),
                          hf_outputs["seq_relationship_logits"]))
        return pairs
    if head in (CLASSIFIER, TAGGER):
        logits = built.model(arrays, training=False)["logits"].numpy()
        real = arrays["input_mask"] > 0 if head == TAGGER else slice(None)
        return [(logits[real], hf_outputs["logits"][real])]
    if head == SQUAD:
        ours = built.model(arrays, training=False)
        real = arrays["input_mask"] > 0
        return [(ours[name].numpy()[real], hf_outputs[name][real])
                for name in ("start_logits", "end_logits")]
    return []


def read_json_lines(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]
