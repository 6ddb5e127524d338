"""The exported SavedModels, loaded in a fresh process, against the Python pipeline.

`export_savedmodel.py` runs its exports in one process (`tests/support/script_runner.py`);
`tests/scripts/test_model_table_export.py` runs one as a separate process, as a user does.

The Python pipeline is the original's: `FullTokenizer`, `[CLS] A [SEP] B [SEP]` packing with its
truncation rule, then the Keras model.
"""
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from data.text_tokenizer import TextTokenizer
from data.tokenization import FullTokenizer, strip_accents
from modeling.checkpoints import LoadedModel, ModelSpec, build_model, read_model, write_model
from modeling.checkpoints.formats import HF, KERAS
from modeling.config import BertConfig
from serving.servers import TextModelServer
from tests.support.exported_models import (assert_fill_mask_outputs, python_features,
                                           run_in_fresh_process)
from tests.support.script_runner import run_cells

pytestmark = pytest.mark.slow

MAX_SEQ_LENGTH = 24
SINGLES = ["Hello, World!", "Naïve café — résumé in ÅNGSTRÖM",
           "中文字符 and 日本語 text", "unaffable " * 30, ""]
PAIRS = [("Is this a question?", "Yes, it is."), ("Only the first", ""),
         ("long words here " * 10, "short"), ("x", "a long second text " * 10)]
CONTEXT = "The Eiffel Tower, in Paris, was completed in 1889 by Gustave Eiffel's company."
QUESTIONS = [("When was the tower completed?", CONTEXT), ("Who built it?", CONTEXT * 3)]
TAGS = ("O", "B-PER", "I-PER")
MASKED = ["The capital of France is [MASK] .", "no mask", "[MASK] [MASK] words", "un[MASK]able",
          "long words here " * 10 + "[MASK]"]

# Runs in a fresh process: loads each SavedModel with tf.saved_model.load and calls a signature.
LOADER = """
import json, sys
import numpy as np
import tensorflow as tf
import tensorflow_text  # registers the tokenizer ops the SavedModels use

requests = json.load(open(sys.argv[1]))
results = {}
for key, folder, signature, inputs in requests:
    loaded = tf.saved_model.load(folder)
    outputs = loaded.signatures[signature](**{k: tf.constant(v) for k, v in inputs.items()})
    for name, value in outputs.items():
        value = value.numpy()
        results[f"{key}/{name}"] = value.astype("S") if value.dtype == object else value
    results[f"{key}/do_lower_case"] = loaded.do_lower_case.numpy()
np.savez(sys.argv[2], **results)
"""


def _model_folder(tmp_path, vocab, spec, labels=None):
    config = BertConfig(vocab_size=sum(1 for _ in open(vocab, encoding="utf-8")), hidden_size=16,
                        num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                        max_position_embeddings=32, type_vocab_size=2, initializer_range=0.5)
    folder = tmp_path / spec.head
    write_model(LoadedModel(build_model(config, spec), spec, str(vocab), True, labels), KERAS,
                str(folder), do_lower_case=True)
    return folder


def _export_flags(folder, output, *flags) -> list[str]:
    return [f"--input={folder}", f"--output={output}", f"--max_seq_length={MAX_SEQ_LENGTH}",
            *flags]


def _squad_export(folder, vocab, output):
    """The text model alone, exported in this process (the script's path is tested above)."""
    server = TextModelServer(read_model(str(folder)).model, TextTokenizer(str(vocab), True),
                             MAX_SEQ_LENGTH, str(vocab))
    tf.saved_model.save(server, str(output), signatures=server.signatures())


@pytest.fixture(scope="module")
def exported(tmp_path_factory, uncased_vocab):
    """The exports, and their outputs from one fresh process that loads them all."""
    tmp_path = tmp_path_factory.mktemp("export")
    classifier = _model_folder(tmp_path, uncased_vocab, ModelSpec("classifier", 3))
    squad = _model_folder(tmp_path, uncased_vocab, ModelSpec("squad"))
    _squad_export(squad, uncased_vocab, tmp_path / "squad_export")
    pretraining = _model_folder(tmp_path, uncased_vocab, ModelSpec("pretraining"))
    encoder = _hf_encoder_folder(tmp_path, uncased_vocab)
    tagger = _model_folder(tmp_path, uncased_vocab, ModelSpec("token_classifier", len(TAGS)),
                           TAGS)
    (tmp_path / "lines.txt").write_text("\n".join(SINGLES) + "\n", encoding="utf-8")
    # The scripts, each running its calls in one process (tests/support/script_runner.py).
    exports = run_cells("export_savedmodel.py", {
        "classifier": _export_flags(classifier, tmp_path / "export"),
        "pretraining": _export_flags(pretraining, tmp_path / "mlm_export", "--top_k=4",
                                     "--pooling=mean", "--normalize"),
        "encoder": _export_flags(encoder, tmp_path / "encoder_export", "--pooling=mean"),
        "tagger": _export_flags(tagger, tmp_path / "tagger_export")},
        str(tmp_path))
    for result in exports.values():
        assert result["status"] == 0, result["stderr"][-3000:]
    assert "classifier head" in exports["classifier"]["stdout"]
    assert "encoder head" in exports["encoder"]["stdout"]
    assert "token_classifier head" in exports["tagger"]["stdout"]
    embedded = run_cells("predict_text.py", {"embed": [
        "--task=embed", f"--model={encoder}", f"--input_file={tmp_path / 'lines.txt'}",
        f"--output_file={tmp_path / 'vectors.npy'}", f"--max_seq_length={MAX_SEQ_LENGTH}",
        "--pooling=mean"]}, str(tmp_path))["embed"]
    assert embedded["status"] == 0, embedded["stderr"][-3000:]
    singles = [(text, "") for text in SINGLES]
    features = python_features(FullTokenizer(str(uncased_vocab), True), singles + PAIRS,
                               MAX_SEQ_LENGTH)
    export = tmp_path / "export"
    results = run_in_fresh_process(tmp_path, LOADER, [
        ["single", str(export / "text_model"), "serving_default", {"text": SINGLES}],
        ["pair", str(export / "text_model"), "serving_pair",
         {"text_a": [a for a, _ in PAIRS], "text_b": [b for _, b in PAIRS]}],
        ["preprocess", str(export / "preprocessing"), "serving_pair",
         {"text_a": [a for a, _ in singles + PAIRS], "text_b": [b for _, b in singles + PAIRS]}],
        ["encoder", str(export / "encoder"), "serving_default",
         {"input_word_ids": features["input_ids"].tolist(),
          "input_mask": features["input_mask"].tolist(),
          "input_type_ids": features["segment_ids"].tolist()}],
        ["squad", str(tmp_path / "squad_export"), "serving_default",
         {"question": [q for q, _ in QUESTIONS], "context": [c for _, c in QUESTIONS]}],
        ["embedding", str(export / "text_model"), "serving_embedding", {"text": SINGLES}],
        ["fill_mask", str(tmp_path / "mlm_export" / "text_model"), "serving_fill_mask",
         {"text": MASKED}],
        ["mean", str(tmp_path / "mlm_export" / "text_model"), "serving_embedding_pair",
         {"text_a": [a for a, _ in PAIRS], "text_b": [b for _, b in PAIRS]}],
        ["encoder_only", str(tmp_path / "encoder_export" / "text_model"), "serving_embedding",
         {"text": SINGLES}],
        ["tagger", str(tmp_path / "tagger_export" / "text_model"), "serving_default",
         {"text": SINGLES}],
    ])
    return {"classifier": classifier, "squad": squad, "pretraining": pretraining, "tagger": tagger,
            "export": export, "features": features, "results": results,
            "predict_text_vectors": np.load(tmp_path / "vectors.npy")}


def test_text_model_matches_the_python_pipeline(exported):
    results, features = exported["results"], exported["features"]
    np.testing.assert_array_equal(results["preprocess/input_word_ids"], features["input_ids"])
    np.testing.assert_array_equal(results["preprocess/input_mask"], features["input_mask"])
    np.testing.assert_array_equal(results["preprocess/input_type_ids"], features["segment_ids"])
    model = read_model(str(exported["classifier"])).model
    expected = model(features, training=False)
    probabilities = np.concatenate([results["single/probabilities"], results["pair/probabilities"]])
    np.testing.assert_allclose(probabilities, tf.nn.softmax(expected["logits"]).numpy(),
                               atol=1e-5, rtol=0)
    np.testing.assert_array_equal(
        np.concatenate([results["single/segment_ids"], results["pair/segment_ids"]]),
        features["segment_ids"])
    encoded = model.encoder(features, training=False)
    for name in ("pooled_output", "sequence_output"):
        np.testing.assert_allclose(results[f"encoder/{name}"], encoded[name].numpy(), atol=1e-5,
                                   rtol=0)
    assert all(results[f"{key}/do_lower_case"] for key in ("single", "preprocess", "encoder"))


def test_a_tagger_gives_each_tokens_probabilities_and_tag(exported):
    """A token classifier with its label names: per-token probabilities as the Keras model's,
    and each token's most probable tag by name."""
    results, features = exported["results"], exported["features"]
    rows = len(SINGLES)
    model = read_model(str(exported["tagger"])).model
    logits = model({k: v[:rows] for k, v in features.items()}, training=False)["logits"]
    expected = tf.nn.softmax(logits).numpy()
    found = results["tagger/probabilities"]
    width = found.shape[1]
    assert width == MAX_SEQ_LENGTH  # a text of the call is cut to max_seq_length
    real = features["input_mask"][:rows] > 0
    np.testing.assert_allclose(found[real], expected[real], atol=1e-5, rtol=0)
    tags = np.array(TAGS)[expected.argmax(-1)]
    assert [tag.decode() for tag in results["tagger/tags"][real]] == list(tags[real])


def test_saved_model_cli_runs_the_export(exported, uncased_vocab, tmp_path):
    command = ("import sys, tensorflow_text; "
               "from tensorflow.python.tools.saved_model_cli import main; sys.exit(main())")
    texts = PAIRS[:2]
    result = subprocess.run(
        [sys.executable, "-c", command, "run", f"--dir={exported['export'] / 'text_model'}",
         "--tag_set=serve", "--signature_def=serving_pair", f"--outdir={tmp_path / 'cli'}",
         "--input_exprs=" + f"text_a={[a for a, _ in texts]!r};text_b={[b for _, b in texts]!r}"],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    features = python_features(FullTokenizer(str(uncased_vocab), True), texts, MAX_SEQ_LENGTH)
    logits = read_model(str(exported["classifier"])).model(features, training=False)["logits"]
    np.testing.assert_allclose(np.load(tmp_path / "cli" / "probabilities.npy"),
                               tf.nn.softmax(logits).numpy(), atol=1e-5, rtol=0)


def test_squad_export_gives_logits_and_token_offsets(exported, uncased_vocab):
    results = exported["results"]
    tokenizer = FullTokenizer(str(uncased_vocab), True)
    features = python_features(tokenizer, QUESTIONS, MAX_SEQ_LENGTH)
    expected = read_model(str(exported["squad"])).model(features, training=False)
    for name in ("start_logits", "end_logits"):
        np.testing.assert_allclose(results[f"squad/{name}"], expected[name].numpy(), atol=1e-5,
                                   rtol=0)
    inverse_vocab = {i: t for t, i in tokenizer.vocab.items()}
    begin, end = results["squad/token_begin"], results["squad/token_end"]
    segment_ids = results["squad/segment_ids"]
    checked = 0
    for row, (question, context) in enumerate(QUESTIONS):
        for position, token_id in enumerate(features["input_ids"][row]):
            piece = inverse_vocab[int(token_id)]
            if piece in ("[CLS]", "[SEP]", "[PAD]"):
                assert begin[row, position] == end[row, position] == -1
                continue
            text = context if segment_ids[row, position] else question
            covered = strip_accents(text[begin[row, position]:end[row, position]].lower())
            assert covered == piece.removeprefix("##"), (row, position, piece, covered)
            checked += 1
    assert checked > 20


def test_fill_mask_and_embedding_signatures_match_the_python_api(exported, uncased_vocab):
    from tasks.embedding import SentenceEmbedder
    from tasks.fill_mask import FillMask
    results = exported["results"]
    tokenizer = FullTokenizer(str(uncased_vocab), True)
    pretrainer = read_model(str(exported["pretraining"])).model
    expected = FillMask(pretrainer, tokenizer, max_seq_length=MAX_SEQ_LENGTH)(MASKED, top_k=4)
    # The last text's [MASK] is cut off by max_seq_length.
    assert [len(masks) for masks in expected] == [1, 0, 2, 1, 0]
    assert results["fill_mask/mask_positions"].shape == (5, 2)
    assert_fill_mask_outputs(results, "fill_mask", expected)
    classifier = read_model(str(exported["classifier"])).model
    vectors = SentenceEmbedder(classifier.encoder, tokenizer, "cls",
                               max_seq_length=MAX_SEQ_LENGTH)(SINGLES)
    np.testing.assert_allclose(results["embedding/embedding"], vectors, atol=1e-5)
    pairs = [f"{a} ||| {b}" if b else a for a, b in PAIRS]
    vectors = SentenceEmbedder(pretrainer.encoder, tokenizer, "mean", normalize=True,
                               max_seq_length=MAX_SEQ_LENGTH)(pairs)
    np.testing.assert_allclose(results["mean/embedding"], vectors, atol=1e-5)


def _hf_encoder_folder(tmp_path, vocab):
    """A Hugging Face `BertModel` folder (no head)."""
    config = BertConfig(vocab_size=sum(1 for _ in open(vocab, encoding="utf-8")),
                        hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32)
    folder = tmp_path / "bert_model"
    spec = ModelSpec("encoder")
    write_model(LoadedModel(build_model(config, spec), spec, str(vocab), True), HF,
                str(folder), do_lower_case=True)
    return folder


def test_an_encoder_only_model_exports_and_embeds_as_predict_text(exported):
    """A Hugging Face `BertModel` folder (no head): the export's sentence vectors are
    `predict_text.py --task=embed`'s."""
    np.testing.assert_allclose(exported["results"]["encoder_only/embedding"],
                               exported["predict_text_vectors"], atol=1e-6, rtol=0)
