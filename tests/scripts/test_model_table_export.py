"""The table of formats x commands (`tests/support/model_table.py`): `predict_text.py --task=embed`
and `export_savedmodel.py`. The SavedModels are loaded in a fresh process: `serving_embedding` gives
`predict_text.py --task=embed`'s vectors to 1e-6, and the head's signatures (`serving_default`,
`serving_fill_mask`) the outputs of the model the row was written from.

An export spends about 9 s of CPU tracing and writing its signatures, whatever the model's size, so
by default the export column runs for every encoder-only row (each its own format; a
sentence-transformers folder its own pooling) and for the refused multiple-choice model; the
other rows' export cells are left out (tests/scripts/test_export_savedmodel.py checks the heads'
signatures). `BERT_MODEL_TABLE=all` runs every row. One export also runs as a separate
process, as a user runs it, with the same SavedModel.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from data.features import stack, text_sequence
from modeling.models.encoder import encoder_of
from tasks.embedding import SentenceEmbedder
from tasks.fill_mask import FillMask
from tests.support.hf_reference import load_hf_model, run_hf
from tests.support.model_table import (ENCODER, MASKED_LM, MAX_SEQ_LENGTH, PAIRS, PRETRAINING,
                                       REPO_ROOT, ROW_NAMES, ROWS, SINGLES, SQUAD, TEXTS,
                                       column_named, expected, row_named)
from tests.support.model_table_cells import check_outcome, make_table, tokenizer_of

pytestmark = pytest.mark.slow

ALL_ROWS = os.environ.get("BERT_MODEL_TABLE") == "all"
EXPORTED = ROW_NAMES if ALL_ROWS else tuple(
    [row.name for row in ROWS if row.head == ENCODER] + ["keras_swag"])
QUESTIONS = [("w1 w2", "w3 w4 w5 w6"), ("w3", "w4 w5 w6 w7 w8")]
SHELL_ROW = "hub_encoder"

# Runs in a fresh process: loads each SavedModel and calls one signature; an error is recorded.
LOADER = """
import json, sys
import numpy as np
import tensorflow as tf
import tensorflow_text  # registers the tokenizer ops the SavedModels use

results, errors, loaded = {}, {}, {}
for key, folder, signature, inputs in json.load(open(sys.argv[1])):
    try:
        if folder not in loaded:
            loaded[folder] = tf.saved_model.load(folder)
        outputs = loaded[folder].signatures[signature](
            **{name: tf.constant(value) for name, value in inputs.items()})
    except Exception as error:
        errors[key] = f"{type(error).__name__}: {error}"
        continue
    for name, value in outputs.items():
        value = value.numpy()
        results[f"{key}/{name}"] = value.astype("S") if value.dtype == object else value
np.savez(sys.argv[2], **results)
json.dump(errors, open(sys.argv[3], "w"))
"""


def _requests(row, folder: str) -> list:
    """The signatures called on one row's text model: its sentence vectors for the embed texts,
    its head's outputs."""
    text_model = os.path.join(folder, "text_model")
    requests = [[f"{row.name}/embedding", text_model, "serving_embedding", {"text": SINGLES}],
                [f"{row.name}/embedding_pair", text_model, "serving_embedding_pair",
                 {"text_a": [p.split(" ||| ")[0] for p in PAIRS],
                  "text_b": [p.split(" ||| ")[1] for p in PAIRS]}]]
    if row.head == SQUAD:
        requests.append([f"{row.name}/default", text_model, "serving_default",
                         {"question": [q for q, _ in QUESTIONS],
                          "context": [c for _, c in QUESTIONS]}])
    else:
        requests.append([f"{row.name}/default", text_model, "serving_default",
                         {"text": SINGLES}])
    if row.head in (PRETRAINING, MASKED_LM):
        requests.append([f"{row.name}/fill_mask", text_model, "serving_fill_mask",
                         {"text": TEXTS["fill_mask"]}])
    return requests


def _load_and_call(work: str, requests: list) -> tuple[dict, dict]:
    paths = [os.path.join(work, name) for name in ("loader.py", "requests.json",
                                                   "outputs.npz", "errors.json")]
    with open(paths[0], "w", encoding="utf-8") as f:
        f.write(LOADER)
    with open(paths[1], "w", encoding="utf-8") as f:
        json.dump(requests, f)
    done = subprocess.run([sys.executable, *paths], capture_output=True, text=True,
                          timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    with np.load(paths[2]) as outputs, open(paths[3], encoding="utf-8") as f:
        return dict(outputs), json.load(f)


def _shell_export(table) -> subprocess.CompletedProcess:
    """The export of SHELL_ROW as a separate process, into `shell_export`."""
    arguments = [f"--output={table.work}/shell_export" if a.startswith("--output=") else a
                 for a in table.results["export", SHELL_ROW].arguments]
    return subprocess.run([sys.executable, "export_savedmodel.py", *arguments], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """The embed and export cells, the shell's export, and the outputs of every SavedModel
    written, from one fresh process."""
    table = make_table(str(tmp_path_factory.mktemp("model_table_export")),
                       [([column_named("embed")], None), ([column_named("export")], EXPORTED)])
    table.shell = _shell_export(table)
    requests = []
    for name in EXPORTED:
        if table.results["export", name].status == 0:
            requests += _requests(row_named(name), table.results["export", name].output)
    requests += [[f"shell/{key.split('/', 1)[1]}", f"{table.work}/shell_export/text_model",
                  signature, inputs] for key, _, signature, inputs in
                 _requests(row_named(SHELL_ROW), "")]
    table.served, table.serving_errors = _load_and_call(table.work, requests)
    return table


def _embedder(built) -> SentenceEmbedder:
    return SentenceEmbedder(encoder_of(built.model), tokenizer_of(built), built.pooling,
                            built.normalize, MAX_SEQ_LENGTH)


def _check_embed(table, built, output):
    np.testing.assert_allclose(np.load(output), _embedder(built)(TEXTS["embed"]), atol=1e-5,
                               rtol=0)
    with open(output[:-len(".npy")] + ".txt", encoding="utf-8") as f:
        assert f.read() == "".join(text + "\n" for text in TEXTS["embed"])


def _served(table, key: str) -> dict[str, np.ndarray]:
    assert key not in table.serving_errors, table.serving_errors[key]
    return {name[len(key) + 1:]: value for name, value in table.served.items()
            if name.startswith(key + "/")}


def _check_default_signature(table, built):
    """serving_default's outputs are the model's on the same tokens (the encoder's for models
    with the pretraining heads)."""
    served = _served(table, f"{built.row.name}/default")
    texts = [f"{q} ||| {c}" for q, c in QUESTIONS] if built.row.head == SQUAD else SINGLES
    features = [text_sequence(text, tokenizer_of(built), MAX_SEQ_LENGTH)[0] for text in texts]
    arrays = stack(features)
    length = served["input_mask"].shape[1]
    np.testing.assert_array_equal(served["input_mask"], arrays["input_mask"][:, :length])
    model = encoder_of(built.model) if built.row.head in (ENCODER, PRETRAINING, MASKED_LM) \
        else built.model
    outputs = model(arrays, training=False)
    compared = [name for name in served if name in outputs and name != "encoder_outputs"]
    assert compared, sorted(served)
    real = arrays["input_mask"][:, :length] > 0
    for name in compared:
        ours, theirs = outputs[name].numpy(), served[name]
        if ours.ndim > 1 and ours.shape[1] == MAX_SEQ_LENGTH:   # per token: the real ones
            ours, theirs = ours[:, :length][real], theirs[real]
        np.testing.assert_allclose(theirs, ours, atol=1e-5, rtol=0, err_msg=name)


def _check_fill_mask_signature(table, built):
    served = _served(table, f"{built.row.name}/fill_mask")
    expected_masks = FillMask(built.model, tokenizer_of(built), MAX_SEQ_LENGTH)(
        TEXTS["fill_mask"], top_k=5)
    for row, masks in enumerate(expected_masks):
        assert (served["mask_positions"][row] >= 0).sum() == len(masks)
        for slot, scores in enumerate(masks):
            assert list(served["token_ids"][row, slot]) == [s.token_id for s in scores]
            np.testing.assert_allclose(served["probabilities"][row, slot],
                                       [s.probability for s in scores], atol=1e-5, rtol=0)


def _check_export(table, built):
    """serving_embedding gives predict_text.py --task=embed's vectors, to 1e-6; the head's
    signatures give the model's outputs."""
    vectors = np.concatenate([_served(table, f"{built.row.name}/embedding")["embedding"],
                              _served(table, f"{built.row.name}/embedding_pair")["embedding"]])
    embed = table.results["embed", built.row.name]
    assert embed.status == 0, embed.stderr[-3000:]
    # Float32 round-off: the two graphs fuse ops differently (Grappler's remapper), 1e-6 relative.
    np.testing.assert_allclose(vectors, np.load(embed.output), atol=1e-6, rtol=1e-6)
    _check_default_signature(table, built)
    if built.row.head in (PRETRAINING, MASKED_LM):
        _check_fill_mask_signature(table, built)


@pytest.mark.parametrize("row,column", [(row, "embed") for row in ROW_NAMES] +
                         [(row, "export") for row in EXPORTED])
def test_cell(table, row, column):
    refusal = expected(row_named(row), column_named(column))
    result = table.results[column, row]
    check_outcome(result, refusal)
    if refusal is None and column == "embed":
        _check_embed(table, table.built[row], result.output)
    elif refusal is None:
        _check_export(table, table.built[row])


def test_sentence_transformers_vectors_are_transformers_mean_pooled_and_normalised(table):
    built = table.built["sentence_transformers"]
    model, _ = load_hf_model("BertModel", built.path)
    features = [text_sequence(text, tokenizer_of(built), MAX_SEQ_LENGTH)[0]
                for text in TEXTS["embed"]]
    arrays = stack(features)
    hidden = run_hf(model, arrays["input_ids"], arrays["input_mask"],
                    arrays["segment_ids"])["last_hidden_state"]
    mask = arrays["input_mask"][..., None]
    mean = (hidden * mask).sum(1) / mask.sum(1)
    np.testing.assert_allclose(np.load(table.results["embed", built.row.name].output),
                               mean / np.linalg.norm(mean, axis=1, keepdims=True), atol=1e-5,
                               rtol=0)


def test_the_runner_exports_as_the_shell_does(table):
    """The export run as a separate process prints the same line and serves the same outputs."""
    cell = table.results["export", SHELL_ROW]
    assert table.shell.returncode == cell.status == 0, table.shell.stderr[-3000:]
    assert table.shell.stdout.replace(f"{table.work}/shell_export", cell.output) == cell.stdout
    for name in ("embedding", "embedding_pair", "default"):
        runner, shell = _served(table, f"{SHELL_ROW}/{name}"), _served(table, f"shell/{name}")
        assert sorted(runner) == sorted(shell)
        for key, value in runner.items():
            np.testing.assert_array_equal(shell[key], value, err_msg=f"{name}/{key}")
