"""The table of formats x commands (`tests/support/model_table.py`): `convert_checkpoint.py
--to=...` and `--init_checkpoint` of `run_pretraining.py` and `run_classifier.py`, their
checkpoints read back and compared, weight by weight, with the model each row was written from;
the `--to=hf` folders also loaded by transformers itself, which computes what the row's model
computes.

Each script runs once for all its cells (`tests/support/script_runner.py`).
"""
import os

import numpy as np
import pytest
import tensorflow as tf

from data.features import stack, text_sequence
from modeling.checkpoints import ModelSpec, read_model
from modeling.checkpoints.hf.config import ARCHITECTURES
from modeling.config import BertConfig
from modeling.models.encoder import encoder_of
from tests.support.hf_reference import load_hf_model, run_hf
from tests.support.model_table import (MASKED_LM, MAX_SEQ_LENGTH, PRETRAINING, ROW_NAMES, TEXTS,
                                       column_named, expected, row_named)
from tests.support.model_table_cells import (check_outcome, hf_head_logits, make_table,
                                             tokenizer_of, weights)

pytestmark = pytest.mark.slow

COLUMNS = ("to_tf1", "to_keras", "to_hf", "to_model_garden", "run_pretraining", "run_classifier")


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    return make_table(str(tmp_path_factory.mktemp("model_table_checkpoints")),
                      [([column_named(name) for name in COLUMNS], None)])


def _check_conversion(built, output, column):
    """The folder written reads back as the same model: head, config and every weight, bit for
    bit; a keras folder keeps the label names."""
    loaded = read_model(output)
    assert loaded.spec == ModelSpec(built.row.head, built.row.num_labels)
    assert loaded.model.config == built.model.config
    source, converted = weights(built.model), weights(loaded.model)
    assert sorted(converted) == sorted(source)
    for name, value in source.items():
        np.testing.assert_array_equal(converted[name], value, err_msg=name)
    if column == "to_keras":
        assert loaded.labels == built.row.labels


def _kept_by_pretraining(name: str, head: str) -> bool:
    """The encoder, and the pretraining heads the model had."""
    return (name.startswith("bert/")
            or name.startswith("cls/predictions/") and head in (PRETRAINING, MASKED_LM)
            or name.startswith("cls/seq_relationship/") and head == PRETRAINING)


def _check_trained(built, output, column):
    """With --learning_rate=0 the checkpoint written holds the weights the model started from:
    the encoder, and for run_pretraining.py the pretraining heads the model had."""
    checkpoint = "bert_model.ckpt" if column == "run_pretraining" else "model.ckpt"
    reader = tf.train.load_checkpoint(os.path.join(output, checkpoint))
    source = weights(built.model)
    kept = [name for name in source if _kept_by_pretraining(name, built.row.head)
            and (column == "run_pretraining" or name.startswith("bert/"))]
    for name in kept:
        np.testing.assert_allclose(reader.get_tensor(name), source[name], atol=1e-5, rtol=0,
                                   err_msg=name)
    assert BertConfig.from_json_file(os.path.join(output, "bert_config.json")) == \
        built.model.config


@pytest.mark.parametrize("column", COLUMNS)
@pytest.mark.parametrize("row", ROW_NAMES)
def test_cell(table, row, column):
    refusal = expected(row_named(row), column_named(column))
    result = table.results[column, row]
    check_outcome(result, refusal)
    if refusal is None:
        check = _check_conversion if column.startswith("to_") else _check_trained
        check(table.built[row], result.output, column)


@pytest.mark.parametrize("row", [name for name in ROW_NAMES
                                 if expected(row_named(name), column_named("to_hf")) is None])
def test_hugging_face_folders_written_run_in_transformers(table, row):
    """transformers loads the `--to=hf` folder as the class of the row's head, with every
    weight in its place, and computes the row's model's hidden states and logits."""
    built = table.built[row]
    hf_model, info = load_hf_model(ARCHITECTURES[built.row.head],
                                   table.results["to_hf", row].output)
    assert not info["missing_keys"] and not info["mismatched_keys"], info
    # The pooler is the only weight a class without a use for it leaves unread.
    assert all(key.startswith("bert.pooler.") for key in info["unexpected_keys"]), info
    tokenizer = tokenizer_of(built)
    arrays = stack([text_sequence(text, tokenizer, MAX_SEQ_LENGTH)[0]
                    for text in TEXTS["extract_features"]])
    hf_outputs = run_hf(hf_model, arrays["input_ids"], arrays["input_mask"],
                        arrays["segment_ids"])
    ours = encoder_of(built.model)(arrays, training=False)["sequence_output"].numpy()
    real = arrays["input_mask"] > 0
    np.testing.assert_allclose(hf_outputs["hidden_states"][-1][real], ours[real], atol=1e-5,
                               rtol=0)
    for mine, theirs in hf_head_logits(built, hf_outputs, arrays):
        np.testing.assert_allclose(mine, theirs, atol=1e-5, rtol=0)
