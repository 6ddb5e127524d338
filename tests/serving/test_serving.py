"""The serving modules on a 16-token vocabulary: token layout, packing, offsets and head outputs.

Every expected id and offset below is worked out by hand from VOCAB; the SavedModel export
itself, in a fresh process and on the real vocabulary, is tested in
tests/scripts/test_export_savedmodel.py.
"""
import numpy as np
import pytest
import tensorflow as tf

from data.text_tokenizer import TextTokenizer
from modeling.config import BertConfig
from modeling.models.encoder import BertEncoder
from modeling.models.pretrainer import BertPretrainer
from modeling.models.task_models import BertClassifier, BertMultipleChoice, BertSpanLabeler
from modeling.models.text_models import MaskedTokenPredictor, SentenceEncoder
from serving.servers import EncoderServer, Preprocessor, TextModelServer, packed_offsets

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", ",", "!", "the", "cat",
         "sat", "un", "##aff", "##able", "?"]
T = 10
HELLO = "Hello, World!"     # hello(5) ,(7) world(6) !(8) at [0,5) [5,6) [7,12) [12,13)
CAT = "The cat sat?"        # the(9) cat(10) sat(11) ?(15) at [0,3) [4,7) [8,11) [11,12)
UNAFFABLE = "unaffable CAT"  # un(12) ##aff(13) ##able(14) cat(10) at [0,2) [2,5) [5,9) [10,13)
LONG = "the cat " * 6       # 12 tokens; a single segment keeps T - 2 = 8

# [CLS] A [SEP] (B [SEP]) then padding; -1 offsets at [CLS], [SEP] and padding.
SINGLES = {
    "texts": [HELLO, LONG],
    "input_ids": [[2, 5, 7, 6, 8, 3, 0, 0, 0, 0], [2, 9, 10, 9, 10, 9, 10, 9, 10, 3]],
    "input_mask": [[1, 1, 1, 1, 1, 1, 0, 0, 0, 0], [1] * 10],
    "segment_ids": [[0] * 10, [0] * 10],
    "token_begin": [[-1, 0, 5, 7, 12, -1, -1, -1, -1, -1], [-1, 0, 4, 8, 12, 16, 20, 24, 28, -1]],
    "token_end": [[-1, 5, 6, 12, 13, -1, -1, -1, -1, -1], [-1, 3, 7, 11, 15, 19, 23, 27, 31, -1]],
}
# Pair 0: 4 + 4 tokens exceed T - 3 = 7; with equal lengths the original drops B's last token.
# Pair 1: an unknown word is one [UNK]. Pair 2: an empty B packs as a single segment.
PAIRS = {
    "texts": [(CAT, UNAFFABLE), (HELLO, "dog"), (CAT, "")],
    "input_ids": [[2, 9, 10, 11, 15, 3, 12, 13, 14, 3], [2, 5, 7, 6, 8, 3, 1, 3, 0, 0],
                  [2, 9, 10, 11, 15, 3, 0, 0, 0, 0]],
    "input_mask": [[1] * 10, [1] * 8 + [0] * 2, [1] * 6 + [0] * 4],
    "segment_ids": [[0] * 6 + [1] * 4, [0] * 6 + [1] * 2 + [0] * 2, [0] * 10],
    "token_begin": [[-1, 0, 4, 8, 11, -1, 0, 2, 5, -1], [-1, 0, 5, 7, 12, -1, 0, -1, -1, -1],
                    [-1, 0, 4, 8, 11, -1, -1, -1, -1, -1]],
    "token_end": [[-1, 3, 7, 11, 12, -1, 2, 5, 9, -1], [-1, 5, 6, 12, 13, -1, 3, -1, -1, -1],
                  [-1, 3, 7, 11, 12, -1, -1, -1, -1, -1]],
}
FEATURES = ("input_ids", "input_mask", "segment_ids")
OFFSETS = ("token_begin", "token_end")
EMBEDDING = ("serving_embedding", "serving_embedding_pair")


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def tokenizer(vocab_file):
    return TextTokenizer(vocab_file, do_lower_case=True)


@pytest.fixture(scope="module")
def config():
    return BertConfig(vocab_size=len(VOCAB), hidden_size=8, num_hidden_layers=1,
                      num_attention_heads=2, intermediate_size=16, max_position_embeddings=16,
                      type_vocab_size=2, initializer_range=0.5)


def _features(expected):
    return {k: tf.constant(expected[k], tf.int32) for k in FEATURES}


def _serve_singles(signatures):
    return signatures["serving_default"](text=tf.constant(SINGLES["texts"]))


def _serve_pairs(signatures):
    return signatures["serving_pair"](text_a=tf.constant([a for a, _ in PAIRS["texts"]]),
                                      text_b=tf.constant([b for _, b in PAIRS["texts"]]))


def _eager_singles(compute):
    """What `serving_default(text)` computes, run eagerly: tracing a text signature takes
    seconds, so only the classifier and SQuAD tests trace theirs."""
    return compute(tf.constant(SINGLES["texts"]))


def _eager_pairs(compute):
    """What `serving_pair(text_a, text_b)` computes, run eagerly."""
    return compute(tf.constant([a for a, _ in PAIRS["texts"]]),
                   tf.constant([b for _, b in PAIRS["texts"]]))


def _assert_layout(outputs, expected, keys=("input_mask", "segment_ids") + OFFSETS):
    for key in keys:
        np.testing.assert_array_equal(outputs[key].numpy(), expected[key], err_msg=key)


def _ragged(rows):
    return tf.ragged.constant(rows, dtype=tf.int64, ragged_rank=1)


def test_packed_offsets_hand_made():
    # Row 0: A kept 2 of 3 values, B kept 1 of 2. Row 1: B empty. Row 2: A empty, B kept 2.
    features = {"input_mask": tf.constant([[1, 1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0, 0],
                                           [1, 1, 1, 1, 1, 0, 0]]),
                "segment_ids": tf.constant([[0, 0, 0, 0, 1, 1, 0], [0, 0, 0, 0, 0, 0, 0],
                                            [0, 0, 1, 1, 1, 0, 0]])}
    first = _ragged([[10, 11, 12], [20], []])
    second = _ragged([[30, 31], [], [40, 41]])
    np.testing.assert_array_equal(
        packed_offsets(features, first, second).numpy(),
        [[-1, 10, 11, -1, 30, -1, -1], [-1, 20, -1, -1, -1, -1, -1],
         [-1, -1, 40, 41, -1, -1, -1]])
    single = {"input_mask": tf.constant([[1, 1, 1, 1, 0]]),
              "segment_ids": tf.zeros([1, 5], tf.int32)}
    result = packed_offsets(single, _ragged([[7, 8, 9]]), None)
    assert result.dtype == tf.int64
    np.testing.assert_array_equal(result.numpy(), [[-1, 7, 8, -1, -1]])


@pytest.mark.parametrize("max_seq_length", [3, 4, 7, 12])
def test_packed_offsets_follow_the_packers_truncation(tokenizer, max_seq_length):
    # Token ids 100 + i in A and 200 + i in B: wherever the packer put a segment token, the
    # offsets must hold that token's index i.
    lengths = [(0, 0), (5, 0), (0, 4), (3, 3), (6, 2), (1, 9), (8, 8)]
    first, second = ([list(range(length[side])) for length in lengths] for side in (0, 1))
    features = tokenizer.pack(_ragged([[100 + i for i in row] for row in first]),
                              _ragged([[200 + i for i in row] for row in second]),
                              max_seq_length)
    ids = features["input_ids"].numpy()
    expected = np.where(ids >= 200, ids - 200, np.where(ids >= 100, ids - 100, -1))
    np.testing.assert_array_equal(
        packed_offsets(features, _ragged(first), _ragged(second)).numpy(), expected)
    assert (ids[:, 0] == 2).all() and (expected >= 0).any()


def test_preprocessor_hand_computed(tokenizer, vocab_file):
    preprocessor = Preprocessor(tokenizer, T, vocab_file)
    for outputs, expected in ((_eager_singles(preprocessor._hub_features), SINGLES),
                              (_eager_pairs(preprocessor._hub_features), PAIRS)):
        assert set(outputs) == {"input_word_ids", "input_mask", "input_type_ids"}
        np.testing.assert_array_equal(outputs["input_word_ids"].numpy(), expected["input_ids"])
        np.testing.assert_array_equal(outputs["input_mask"].numpy(), expected["input_mask"])
        np.testing.assert_array_equal(outputs["input_type_ids"].numpy(), expected["segment_ids"])
        assert outputs["input_word_ids"].dtype == tf.int32
    assert bool(preprocessor.do_lower_case.numpy())


@pytest.mark.slow
def test_classifier_text_model(tokenizer, vocab_file, config):
    model = BertClassifier(config, num_labels=3)
    signatures = TextModelServer(model, tokenizer, T, vocab_file).signatures()
    assert set(signatures) == {"serving_default", "serving_pair", *EMBEDDING}
    for outputs, expected in ((_serve_singles(signatures), SINGLES),
                              (_serve_pairs(signatures), PAIRS)):
        assert set(outputs) == {"logits", "probabilities", "input_mask", "segment_ids",
                                *OFFSETS}
        _assert_layout(outputs, expected)
        logits = model(_features(expected), training=False)["logits"].numpy()
        np.testing.assert_allclose(outputs["logits"].numpy(), logits, atol=1e-5)
        probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
        np.testing.assert_allclose(outputs["probabilities"].numpy(), probabilities, atol=1e-6)


def test_each_call_is_padded_to_its_own_longest_text(tokenizer, vocab_file, config):
    model = BertSpanLabeler(config)
    outputs = TextModelServer(model, tokenizer, T, vocab_file)._serve(
        tf.constant([HELLO, "the cat"]))
    # HELLO packs to 6 tokens, "the cat" to 4: the call is 6 wide, not T = 10.
    assert outputs["start_logits"].shape == (2, 6)
    np.testing.assert_array_equal(outputs["input_mask"].numpy(), [[1] * 6, [1] * 4 + [0] * 2])
    np.testing.assert_array_equal(outputs["token_begin"].numpy(),
                                  [SINGLES["token_begin"][0][:6], [-1, 0, 4, -1, -1, -1]])
    padded = {"input_ids": tf.constant([SINGLES["input_ids"][0], [2, 9, 10, 3] + [0] * 6]),
              "input_mask": tf.constant([SINGLES["input_mask"][0], [1] * 4 + [0] * 6]),
              "segment_ids": tf.zeros([2, T], tf.int32)}
    expected = model(padded, training=False)
    real = outputs["input_mask"].numpy() > 0
    for name in ("start_logits", "end_logits"):
        np.testing.assert_allclose(outputs[name].numpy()[real],
                                   expected[name].numpy()[:, :6][real], atol=1e-5)


def test_fill_mask_keeps_each_mask_whole_and_finds_its_position(tokenizer, vocab_file, config):
    model = BertPretrainer(config)
    outputs = TextModelServer(model, tokenizer, T, vocab_file, top_k=3)._fill_masks(
        tf.constant(["the [MASK] sat", "hello", "[MASK] cat [MASK]", "un[MASK]able"]))
    # [CLS] the [MASK] sat [SEP]; [CLS] hello [SEP]; [CLS] [MASK] cat [MASK] [SEP];
    # [CLS] un [MASK] ##able: "able" alone is [UNK] in VOCAB, so [CLS] un [MASK] [UNK] [SEP].
    np.testing.assert_array_equal(outputs["mask_positions"].numpy(),
                                  [[2, -1], [-1, -1], [1, 3], [2, -1]])
    features = {"input_ids": tf.constant([[2, 9, 4, 11, 3], [2, 5, 3, 0, 0], [2, 4, 10, 4, 3],
                                          [2, 12, 4, 1, 3]]),
                "input_mask": tf.constant([[1] * 5, [1, 1, 1, 0, 0], [1] * 5, [1] * 5]),
                "segment_ids": tf.zeros([4, 5], tf.int32),
                "masked_lm_positions": tf.constant([[2, 0], [0, 0], [1, 3], [2, 0]])}
    expected = MaskedTokenPredictor(model, 3)(features, training=False)
    np.testing.assert_array_equal(outputs["token_ids"].numpy(), expected["token_ids"].numpy())
    np.testing.assert_allclose(outputs["probabilities"].numpy(),
                               expected["probabilities"].numpy(), atol=1e-6)
    assert outputs["tokens"].numpy()[2, 1].tolist() == [
        VOCAB[i].encode() for i in expected["token_ids"].numpy()[2, 1]]


def test_embedding_is_the_pooled_encoder_output(tokenizer, vocab_file, config):
    model = BertClassifier(config, num_labels=2)
    server = TextModelServer(model, tokenizer, T, vocab_file, pooling="mean", normalize=True)
    outputs = server._embed(tf.constant([a for a, _ in PAIRS["texts"]]),
                            tf.constant([b for _, b in PAIRS["texts"]]))
    expected = SentenceEncoder(model.encoder, "mean", True)(_features(PAIRS), training=False)
    np.testing.assert_allclose(outputs["embedding"].numpy(), expected["embedding"].numpy(),
                               atol=1e-6)


def test_regression_text_model_gives_predictions(tokenizer, vocab_file, config):
    model = BertClassifier(config, num_labels=1)
    outputs = _eager_pairs(TextModelServer(model, tokenizer, T, vocab_file)._serve)
    assert set(outputs) == {"logits", "predictions", "input_mask", "segment_ids", *OFFSETS}
    logits = model(_features(PAIRS), training=False)["logits"].numpy()
    assert outputs["predictions"].shape == (3,)
    np.testing.assert_allclose(outputs["predictions"].numpy(), logits[:, 0], atol=1e-5)


def test_squad_text_model_takes_question_and_context(tokenizer, vocab_file, config):
    model = BertSpanLabeler(config)
    signatures = TextModelServer(model, tokenizer, T, vocab_file).signatures()
    assert set(signatures) == {"serving_default", *EMBEDDING}
    questions, contexts = zip(*PAIRS["texts"])
    outputs = signatures["serving_default"](question=tf.constant(questions),
                                            context=tf.constant(contexts))
    assert set(outputs) == {"start_logits", "end_logits", "input_mask", "segment_ids", *OFFSETS}
    _assert_layout(outputs, PAIRS)
    expected = model(_features(PAIRS), training=False)
    for name in ("start_logits", "end_logits"):
        np.testing.assert_allclose(outputs[name].numpy(), expected[name].numpy(), atol=1e-5)


def test_pretrainer_serves_its_encoder(tokenizer, vocab_file, config):
    model = BertPretrainer(config)
    outputs = _eager_singles(TextModelServer(model, tokenizer, T, vocab_file)._serve)
    assert set(outputs) == {"pooled_output", "sequence_output", "input_mask", "segment_ids",
                            *OFFSETS}
    expected = model.encoder(_features(SINGLES), training=False)
    for name in ("pooled_output", "sequence_output"):
        np.testing.assert_allclose(outputs[name].numpy(), expected[name].numpy(), atol=1e-5)


def test_multiple_choice_has_no_text_signature(tokenizer, vocab_file, config):
    with pytest.raises(ValueError, match="multiple-choice"):
        TextModelServer(BertMultipleChoice(config), tokenizer, T, vocab_file)


def test_encoder_server_and_its_variables_saved_once(tmp_path, vocab_file, config):
    encoder = BertEncoder(config)
    server = EncoderServer(encoder, vocab_file, do_lower_case=False)
    features = _features(PAIRS)
    outputs = server.signatures()["serving_default"](
        input_word_ids=features["input_ids"], input_mask=features["input_mask"],
        input_type_ids=features["segment_ids"])
    expected = encoder(features, training=False)
    np.testing.assert_allclose(outputs["sequence_output"].numpy(),
                               expected["sequence_output"].numpy(), atol=1e-5)
    np.testing.assert_allclose(outputs["pooled_output"].numpy(),
                               expected["pooled_output"].numpy(), atol=1e-5)
    np.testing.assert_array_equal(outputs["default"].numpy(), outputs["pooled_output"].numpy())
    tf.saved_model.save(server, str(tmp_path / "encoder"), signatures=server.signatures())
    saved = [name for name, _ in tf.train.list_variables(str(tmp_path / "encoder" / "variables"
                                                             / "variables"))
             if name != "_CHECKPOINTABLE_OBJECT_GRAPH"]
    # Each encoder weight once, plus `do_lower_case`.
    assert len(saved) == len(encoder.weights) + 1
