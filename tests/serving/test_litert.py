"""LiteRT export (`export_savedmodel.py --format=litert`, `serving/litert.py`) and its tokenizer
(`serving/lite_tokenizer.py`).

The `.tflite` files are loaded in a fresh process by LiteRT's interpreter (`ai-edge-litert`) with
tensorflow-text's kernels, and compared with the Python pipeline (`FullTokenizer`, the original's
packing, the Keras model) and the SavedModel's `TextModelServer`. The tokenizer is compared with
`FullTokenizer` on the shared corpora: equal except on the texts the docs count.
"""
import collections
import unicodedata

import numpy as np
import pytest
import tensorflow as tf

from data import tokenization
from data.classifier import glue_tasks
from data.features import truncate_seq_pair
from data.text_tokenizer import TextTokenizer
from data.tokenization import FullTokenizer
from modeling.checkpoints import LoadedModel, ModelSpec, build_model, read_model, write_model
from modeling.checkpoints.formats import KERAS
from modeling.config import BertConfig
from modeling.models.pretrainer import BertPretrainer
from serving.lite_tokenizer import LiteTokenizer
from serving.litert import CUSTOM_OPS, custom_ops
from serving.servers import TextModelServer
from tests.support.exported_models import (assert_fill_mask_outputs, python_features,
                                           run_in_fresh_process)
from tests.support.script_runner import run_cells

MAX_SEQ_LENGTH = 24
SINGLES = ["Hello, World!", "Naïve café — résumé in ÅNGSTRÖM", "中文字符 and 日本語 text",
           "unaffable " * 30, ""]
PAIRS = [("Is this a question?", "Yes, it is."), ("Only the first", ""),
         ("long words here " * 10, "short"), ("x", "a long second text " * 10)]
MASKED = ["The capital of France is [MASK] .", "no mask", "[MASK] [MASK] words", "un[MASK]able",
          "long words here " * 10 + "[MASK]"]
# Where FastBertTokenizer and FullTokenizer part (lower-cased), and a text where they agree.
DIVERGING = ["died 4 ½ months later", "at 35° 47′ 28″ north", "canal at Fußach",
             "σπόνδυλος (vertebra)", "to Iraq\x80\x99s interim", "The µGuru chip", "a 24‑hour period",
             "healthy living…"]
AGREEING = "The cat sat on the mat, didn't it?"
# Quantized models against the float32 one, on the probabilities of these tiny random models
# (initializer_range 0.5), sentence vectors within 5x as much: three random models gave at most
# 4.3e-4 (float16) and 2.0e-3 (int8) on the probabilities, 1.4e-3 and 8.3e-3 on the vectors.
# The real models' differences are in bench/README.md.
QUANTIZED_ATOL = {"float16": 2e-3, "dynamic_int8": 1e-2}

# Runs in a fresh process: LiteRT's interpreter with tensorflow-text's kernels, nothing else.
LOADER = """
import json, sys
import numpy as np
from ai_edge_litert.interpreter import InterpreterWithCustomOps
from tensorflow_text.core.pybinds import tflite_registrar

results = {}
for key, path, signature, inputs in json.load(open(sys.argv[1])):
    interpreter = InterpreterWithCustomOps(
        model_path=path, custom_op_registerers=tflite_registrar.SELECT_TFTEXT_OPS)
    runner = interpreter.get_signature_runner(signature)
    arrays = {k: np.array(v, dtype=object if isinstance(np.ravel(v)[0], str) else np.int32)
              for k, v in inputs.items()}
    for name, value in runner(**arrays).items():
        results[f"{key}/{name}"] = value.astype("S") if value.dtype == object else value
np.savez(sys.argv[2], **results)
"""


def _config(vocab):
    return BertConfig(vocab_size=sum(1 for _ in open(vocab, encoding="utf-8")), hidden_size=16,
                      num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                      max_position_embeddings=32, type_vocab_size=2, initializer_range=0.5)


def _model_folder(tmp_path, vocab, spec):
    folder = tmp_path / spec.head
    write_model(LoadedModel(build_model(_config(vocab), spec), spec, str(vocab), True), KERAS,
                str(folder), do_lower_case=True)
    return folder


def _export_all(exports: dict[str, list], work_dir) -> dict[str, dict]:
    """export_savedmodel.py on each {name: [input folder, output folder, flags...]}, all in one
    process (`tests/support/script_runner.py`); {name: what it did}."""
    return run_cells("export_savedmodel.py", {
        name: [f"--input={folder}", f"--output={output}", f"--max_seq_length={MAX_SEQ_LENGTH}",
               *flags] for name, (folder, output, *flags) in exports.items()}, str(work_dir))


def _tokenizer_model(vocab, path):
    """A `.tflite` of LiteTokenizer alone: text -> packed `input_ids`."""
    module = tf.Module()
    module.tokenizer = LiteTokenizer(vocab, True)
    function = tf.function(
        lambda text: {"input_ids": module.tokenizer.pack(module.tokenizer.tokenize(text), None,
                                                         64, pad_to_longest=True)["input_ids"]},
        input_signature=[tf.TensorSpec([None], tf.string)])
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [function.get_concrete_function()], module)
    converter.allow_custom_ops = True
    path.write_bytes(converter.convert())


@pytest.fixture(scope="module")
def exported(tmp_path_factory, uncased_vocab):
    """The LiteRT exports of a tiny classifier (float32, float16, int8) and pretrainer, and their
    outputs from one fresh process that loads them all."""
    tmp_path = tmp_path_factory.mktemp("litert")
    classifier = _model_folder(tmp_path, uncased_vocab, ModelSpec("classifier", 3))
    pretraining = _model_folder(tmp_path, uncased_vocab, ModelSpec("pretraining"))
    outputs = {"none": tmp_path / "float32",
               **{quantize: tmp_path / quantize for quantize in QUANTIZED_ATOL}}
    done = _export_all({
        **{quantize: [classifier, output, "--format=litert", f"--quantize={quantize}"]
           for quantize, output in outputs.items()},
        "mlm": [pretraining, tmp_path / "mlm", "--format=litert", "--top_k=4", "--pooling=mean",
                "--normalize"]}, tmp_path)
    for result in done.values():
        assert result["status"] == 0, result["stderr"][-3000:]
    assert "text_model.tflite, embedding.tflite (classifier head" in done["none"]["stdout"]
    _tokenizer_model(str(uncased_vocab), tmp_path / "tokenizer.tflite")
    features = python_features(FullTokenizer(str(uncased_vocab), True),
                               [(text, "") for text in SINGLES] + PAIRS, MAX_SEQ_LENGTH)
    text_a, text_b = [a for a, _ in PAIRS], [b for _, b in PAIRS]
    requests = [
        ["ids", str(outputs["none"] / "text_model.tflite"), "serving_ids",
         {k: v.tolist() for k, v in features.items()}],
        ["mlm_ids", str(tmp_path / "mlm" / "fill_mask.tflite"), "serving_fill_mask_ids",
         {k: v[:2].tolist() for k, v in features.items()}],
        ["fill_mask", str(tmp_path / "mlm" / "fill_mask.tflite"), "serving_fill_mask",
         {"text": MASKED}],
        ["mean", str(tmp_path / "mlm" / "embedding.tflite"), "serving_embedding_pair",
         {"text_a": text_a, "text_b": text_b}],
        ["tokenizer", str(tmp_path / "tokenizer.tflite"), "serving_default",
         {"text": DIVERGING + [AGREEING]}],
    ]
    for quantize, folder in outputs.items():
        requests += [
            [f"{quantize}/single", str(folder / "text_model.tflite"), "serving_default",
             {"text": SINGLES}],
            [f"{quantize}/pair", str(folder / "text_model.tflite"), "serving_pair",
             {"text_a": text_a, "text_b": text_b}],
            [f"{quantize}/embedding", str(folder / "embedding.tflite"), "serving_embedding",
             {"text": SINGLES}],
        ]
    return {"classifier": classifier, "pretraining": pretraining, "outputs": outputs,
            "mlm": tmp_path / "mlm", "features": features,
            "results": run_in_fresh_process(tmp_path, LOADER, requests)}


def _classifier_probabilities(exported, prefix):
    results = exported["results"]
    return np.concatenate([results[f"{prefix}/single/probabilities"],
                           results[f"{prefix}/pair/probabilities"]])


@pytest.mark.slow
def test_float32_classifier_matches_the_keras_model_and_the_saved_models_layout(
        exported, uncased_vocab):
    results, features = exported["results"], exported["features"]
    model = read_model(str(exported["classifier"])).model
    expected = tf.nn.softmax(model(features, training=False)["logits"]).numpy()
    np.testing.assert_allclose(_classifier_probabilities(exported, "none"), expected,
                               atol=1e-5, rtol=0)
    np.testing.assert_allclose(tf.nn.softmax(results["ids/logits"]).numpy(), expected,
                               atol=1e-5, rtol=0)
    # Masks, segments and each token's character span: those of the SavedModel's text model.
    server = TextModelServer(model, TextTokenizer(str(uncased_vocab), True), MAX_SEQ_LENGTH,
                             str(uncased_vocab))
    saved = {"single": server._serve(tf.constant(SINGLES)),
             "pair": server._serve(tf.constant([a for a, _ in PAIRS]),
                                   tf.constant([b for _, b in PAIRS]))}
    for key, outputs in saved.items():
        for name in ("input_mask", "segment_ids", "token_begin", "token_end"):
            np.testing.assert_array_equal(results[f"none/{key}/{name}"], outputs[name].numpy(),
                                          err_msg=f"{key}/{name}")
        np.testing.assert_allclose(results[f"none/{key}/logits"], outputs["logits"].numpy(),
                                   atol=1e-5, rtol=0)


@pytest.mark.slow
@pytest.mark.parametrize("quantize", list(QUANTIZED_ATOL))
def test_quantized_classifier_within_its_bound(exported, quantize):
    expected = _classifier_probabilities(exported, "none")
    got = _classifier_probabilities(exported, quantize)
    np.testing.assert_allclose(got, expected, atol=QUANTIZED_ATOL[quantize], rtol=0)
    assert not np.array_equal(got, expected)  # the weights are stored otherwise
    embedding = exported["results"][f"{quantize}/embedding/embedding"]
    np.testing.assert_allclose(embedding, exported["results"]["none/embedding/embedding"],
                               atol=QUANTIZED_ATOL[quantize] * 5, rtol=0)
    sizes = {q: (folder / "text_model.tflite").stat().st_size
             for q, folder in exported["outputs"].items()}
    assert sizes[quantize] < sizes["none"]


@pytest.mark.slow
def test_fill_mask_and_embeddings_match_the_python_api(exported, uncased_vocab):
    from tasks.embedding import SentenceEmbedder
    from tasks.fill_mask import FillMask
    results = exported["results"]
    tokenizer = FullTokenizer(str(uncased_vocab), True)
    pretrainer = read_model(str(exported["pretraining"])).model
    expected = FillMask(pretrainer, tokenizer, max_seq_length=MAX_SEQ_LENGTH)(MASKED, top_k=4)
    assert [len(masks) for masks in expected] == [1, 0, 2, 1, 0]  # the last [MASK] cut off
    assert results["fill_mask/mask_positions"].shape == (5, 2)
    assert_fill_mask_outputs(results, "fill_mask", expected)
    # Token ids without a [MASK]: no position, nothing predicted.
    assert (results["mlm_ids/mask_positions"] == -1).all()
    classifier = read_model(str(exported["classifier"])).model
    vectors = SentenceEmbedder(classifier.encoder, tokenizer, "cls",
                               max_seq_length=MAX_SEQ_LENGTH)(SINGLES)
    np.testing.assert_allclose(results["none/embedding/embedding"], vectors, atol=1e-5)
    pairs = [f"{a} ||| {b}" if b else a for a, b in PAIRS]
    vectors = SentenceEmbedder(pretrainer.encoder, tokenizer, "mean", normalize=True,
                               max_seq_length=MAX_SEQ_LENGTH)(pairs)
    np.testing.assert_allclose(results["mean/embedding"], vectors, atol=1e-5)


@pytest.mark.slow
def test_each_file_needs_only_kernels_litert_has(exported):
    """A classifier has no masked-LM head: no fill_mask.tflite, the rest is there."""
    assert sorted(p.name for p in exported["outputs"]["none"].iterdir()) == [
        "embedding.tflite", "text_model.tflite"]
    assert sorted(p.name for p in exported["mlm"].iterdir()) == [
        "embedding.tflite", "fill_mask.tflite", "text_model.tflite"]
    for path in [*exported["outputs"]["none"].iterdir(), *exported["mlm"].iterdir()]:
        assert set(custom_ops(path.read_bytes())) <= set(CUSTOM_OPS), path


@pytest.mark.slow
def test_tokenizer_in_litert_is_fast_bert_tokenizer(exported, uncased_vocab):
    """LiteRT's kernels tokenize as TensorFlow's; both part from FullTokenizer on exactly the
    characters the docs name."""
    texts = DIVERGING + [AGREEING]
    got = exported["results"]["tokenizer/input_ids"]
    lite = LiteTokenizer(str(uncased_vocab), True)
    in_tensorflow = lite.pack(lite.tokenize(tf.constant(texts)), None, 64, True)["input_ids"]
    np.testing.assert_array_equal(got, in_tensorflow.numpy())
    full = FullTokenizer(str(uncased_vocab), True)
    for row, text in enumerate(texts):
        ids = [full.vocab["[CLS]"]] + full.convert_tokens_to_ids(full.tokenize(text)) + [
            full.vocab["[SEP]"]]
        same = got[row, :len(ids)].tolist() == ids and not got[row, len(ids):].any()
        assert same == (text == AGREEING), text


BAD_FLAGS = {"onnx": (["--format=onnx"], "--format"),
             "int4": (["--format=litert", "--quantize=int4"], "--quantize"),
             "saved_model_float16": (["--quantize=float16"], "applies to --format=litert only")}


@pytest.fixture(scope="module")
def bad_flag_runs(tmp_path_factory) -> dict[str, tuple]:
    """{case: (its folder, what the export did)}, all in one process. Refused before the input
    is read: a model folder is not even needed."""
    root = tmp_path_factory.mktemp("bad_flags")
    for case in BAD_FLAGS:
        (root / case).mkdir()
    results = _export_all({case: [root / case / "model", root / case / "out", *flags]
                           for case, (flags, _) in BAD_FLAGS.items()}, root)
    return {case: (root / case, results[case]) for case in BAD_FLAGS}


@pytest.mark.slow
@pytest.mark.parametrize("case", BAD_FLAGS)
def test_bad_format_or_quantize_refused_with_nothing_written(bad_flag_runs, case):
    folder, result = bad_flag_runs[case]
    assert result["status"] != 0
    assert BAD_FLAGS[case][1] in result["stderr"]
    assert not list(folder.iterdir())


@pytest.mark.slow
def test_squad_model_serves_question_and_context(tmp_path, uncased_vocab):
    """A SQuAD model's text_model.tflite: `serving_default(question, context)` as the
    SavedModel's, logits and token offsets (exported in this process)."""
    from serving.litert import LiteTextModel, export_litert, load_interpreter
    model = build_model(_config(uncased_vocab), ModelSpec("squad"))
    export_litert(LiteTextModel(model, str(uncased_vocab), True, MAX_SEQ_LENGTH), str(tmp_path))
    questions = ["When was the tower completed?", "Who built it?"]
    contexts = ["The Eiffel Tower, in Paris, was completed in 1889 by Gustave Eiffel's company."] * 2
    runner = load_interpreter(str(tmp_path / "text_model.tflite")).get_signature_runner(
        "serving_default")
    got = runner(question=np.array(questions, object), context=np.array(contexts, object))
    server = TextModelServer(model, TextTokenizer(str(uncased_vocab), True), MAX_SEQ_LENGTH,
                             str(uncased_vocab))
    expected = server._serve(tf.constant(questions), tf.constant(contexts))
    assert set(got) == set(expected)
    for name, value in expected.items():
        np.testing.assert_allclose(got[name], value.numpy(), atol=1e-5, rtol=0, err_msg=name)


# --- The tokenizer and packing, in TensorFlow (fast) -----------------------------------------

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "un", "##able", "[",
         "]", "mask", "é", "."]


@pytest.fixture(scope="module")
def small_vocab(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    return str(path)


def _original_packing(first, second, max_seq_length, length):
    """`convert_single_example`'s ids, mask and segments of id lists, padded to `length`."""
    first, second = list(first), list(second)
    if second:
        truncate_seq_pair(first, second, max_seq_length - 3)
    else:
        first = first[:max_seq_length - 2]
    ids, segment_ids = [2] + first + [3], [0] * (len(first) + 2)
    if second:  # empty once truncated: no second [SEP]
        ids, segment_ids = ids + second + [3], segment_ids + [1] * (len(second) + 1)
    padding = [0] * (length - len(ids))
    return ids + padding, [1] * len(ids) + padding, segment_ids + padding


@pytest.mark.parametrize("pad_to_longest", [False, True])
@pytest.mark.parametrize("max_seq_length", [3, 4, 5, 9])
def test_pack_is_the_originals(small_vocab, max_seq_length, pad_to_longest):
    lengths = [(0, 0), (5, 0), (0, 4), (1, 1), (3, 3), (6, 2), (1, 9), (8, 8)]
    rows = [[[100 + i for i in range(n[side])] for n in lengths] for side in (0, 1)]
    first, second = (tf.ragged.constant(r, dtype=tf.int32, ragged_rank=1) for r in rows)
    lite = LiteTokenizer(small_vocab)
    for pair in (True, False):
        got = lite.pack(first, second if pair else None, max_seq_length, pad_to_longest)
        length = got["input_ids"].shape[1]
        assert length == max_seq_length or pad_to_longest
        expected = [_original_packing(a, b if pair else [], max_seq_length, length)
                    for a, b in zip(*rows)]
        for index, name in enumerate(("input_ids", "input_mask", "segment_ids")):
            np.testing.assert_array_equal(got[name].numpy(), [e[index] for e in expected],
                                          err_msg=name)


def test_offsets_are_code_points_as_text_tokenizers(small_vocab):
    texts = tf.constant(["the cat", "é the.", "ééé cat sat", "", "unable é"])
    lite = LiteTokenizer(small_vocab).tokenize_with_offsets(texts)
    text_tokenizer = TextTokenizer(small_vocab)  # held: its tf.function holds it weakly
    original = text_tokenizer.tokenize_with_offsets(texts)
    for got, expected in zip(lite, original):
        assert got.to_list() == expected.to_list()
    assert lite[1].dtype == tf.int64


def test_each_literal_mask_is_one_token_as_the_saved_model_has_it(small_vocab):
    texts = tf.constant(["the [MASK] sat", "un[MASK]able", "[MASK][MASK].", "[mask] the",
                         "the [MASK", "é[MASK]é", ""])
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=8, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=16, max_position_embeddings=16)
    server = TextModelServer(BertPretrainer(config), TextTokenizer(small_vocab), 16, small_vocab)
    expected = server._masked_ids(texts)
    got = LiteTokenizer(small_vocab).tokenize_keeping(texts, "[MASK]", server.mask_id)
    assert got.to_list() == expected.to_list()
    assert got[0].numpy().tolist() == [5, 4, 7]


# --- Against FullTokenizer on the shared corpora -----------------------------------------------

# Texts of each corpus (wikitext-2's non-empty lines; each dev example's one or two texts) whose
# wordpieces differ, as counted in docs/new-text-and-serving.md.
DIFFERING = {
    True: {"wikitext-2 test": 5, "wikitext-2 valid": 34, "cola": 0, "mrpc": 1, "qnli": 22,
           "rte": 1, "sst2": 0, "stsb": 1, "wnli": 0},
    False: {"wikitext-2 test": 0, "wikitext-2 valid": 0, "cola": 0, "mrpc": 0, "qnli": 0,
            "rte": 1, "sst2": 0, "stsb": 0, "wnli": 0},
}
GLUE_FOLDERS = {"cola": "CoLA", "mrpc": "MRPC", "qnli": "QNLI", "rte": "RTE", "sst2": "SST-2",
                "stsb": "STS-B", "wnli": "WNLI"}


def _corpora(data_dir):
    corpora = collections.OrderedDict()
    for name, path in (("wikitext-2 test", "wikitext-2-raw/wiki.test.raw"),
                       ("wikitext-2 valid", "wikitext-2-tokenized/wiki.valid.tokens")):
        with open(data_dir / path, encoding="utf-8") as f:
            corpora[name] = [line.strip() for line in f if line.strip()]
    for task, folder in GLUE_FOLDERS.items():
        examples = glue_tasks.read_examples(glue_tasks.get_task(task), data_dir / "glue" / folder,
                                            "dev")
        corpora[task] = [t for e in examples for t in (e.text_a, e.text_b) if t]
    return corpora


def _named_characters(text, lower_case):
    """The characters of a text on which the docs say the two tokenizers part."""
    def named(char):
        if tokenization.is_control(char) or ord(char) in (0, 0xFFFD):
            return True  # FastBertTokenizer: a space; FullTokenizer: removed
        return lower_case and (unicodedata.normalize("NFKC", char) != char  # compatibility
                               or char.casefold() != char.lower())          # case folding
    return [char for char in text if named(char)]


@pytest.mark.slow
@pytest.mark.parametrize("lower_case", [True, False], ids=["uncased", "cased"])
def test_fast_bert_tokenizer_against_full_tokenizer_on_the_shared_corpora(
        shared_data_dir, lower_case):
    vocab = shared_data_dir / "vocab" / ("uncased_vocab.txt" if lower_case else "cased_vocab.txt")
    full, lite = FullTokenizer(str(vocab), lower_case), LiteTokenizer(str(vocab), lower_case)
    differing = {}
    for name, texts in _corpora(shared_data_dir).items():
        got = lite.tokenize(tf.constant(texts)).to_list()
        parted = [text for text, ids in zip(texts, got)
                  if full.convert_tokens_to_ids(full.tokenize(text)) != ids]
        differing[name] = len(parted)
        for text in parted:
            assert _named_characters(text, lower_case), text
        assert len(texts) > 100
    assert differing == DIFFERING[lower_case]

