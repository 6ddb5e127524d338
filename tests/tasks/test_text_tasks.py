"""A model on new text from Python: fill-mask against the original's masked-LM outputs and
transformers' fill-mask pipeline, sentence vectors against hand pooling and transformers, and the
windows of texts longer than max_seq_length (classify, NER) against sequences built by hand."""
import json
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

from data.tokenization import FullTokenizer
from modeling import checkpoints
from modeling.checkpoints import ModelSpec, build_model
from modeling.checkpoints.names import tf1_name_map
from modeling.checkpoints.tf1.checkpoint import assign_tf1_values
from modeling.config import BertConfig
from modeling.models.text_models import POOLINGS, MaskedTokenPredictor
from tasks.classifier import TextClassifier
from tasks.embedding import SentenceEmbedder
from tasks.fill_mask import MASK, FillMask
from tasks.ner import EntityTagger
from tests.support.dependencies import require
from tests.support.hf_reference import load_hf_model, run_hf
from tests.support.modeling_fixtures import golden, golden_inputs, tiny_dir

ORIGINAL = "bert_model.ckpt"


def _read(fixtures_dir, uncased_vocab, prefix=ORIGINAL):
    return checkpoints.read_model(str(tiny_dir(fixtures_dir) / prefix), "tf1",
                                  str(tiny_dir(fixtures_dir) / "bert_config.json"),
                                  str(uncased_vocab))


@pytest.mark.parametrize("length", [16, 64])
def test_masked_token_predictions_are_the_originals_top_k(fixtures_dir, uncased_vocab, length):
    expected = golden(fixtures_dir, length)
    predictor = MaskedTokenPredictor(_read(fixtures_dir, uncased_vocab).model, top_k=5)
    outputs = predictor(golden_inputs(expected), training=False)
    probabilities = np.exp(expected["masked_lm_log_probs"])          # [B * 6, V]
    top = np.argsort(-probabilities, axis=-1, kind="stable")[:, :5]
    np.testing.assert_array_equal(outputs["token_ids"].numpy().reshape(-1, 5), top)
    np.testing.assert_allclose(outputs["probabilities"].numpy().reshape(-1, 5),
                               np.take_along_axis(probabilities, top, -1), atol=1e-6)


def _masked_sentences(shared_data_dir, count: int, masks: int, seed: int) -> list[str]:
    """`count` real sentences of WikiText-2 (6 to 60 words) with `masks` random words of each
    replaced by [MASK]."""
    rng = np.random.default_rng(seed)
    path = shared_data_dir / "wikitext-2-raw" / "wiki.test.sentences.txt"
    sentences = [line.split() for line in path.read_text(encoding="utf-8").splitlines()]
    chosen = [words for words in sentences[seed::7] if 6 <= len(words) <= 60][:count]
    for words in chosen:
        for index in rng.choice(len(words), masks, replace=False):
            words[index] = MASK
    assert len(chosen) == count
    return [" ".join(words) for words in chosen]


@pytest.fixture(scope="module")
def hf_pretrainer(fixtures_dir, uncased_vocab, tmp_path_factory):
    folder = tmp_path_factory.mktemp("hf") / "model"
    checkpoints.write_model(_read(fixtures_dir, uncased_vocab), "hf", str(folder),
                            do_lower_case=True)
    return folder


@pytest.mark.slow
def test_fill_mask_gives_the_top_tokens_of_transformers_pipeline(
        fixtures_dir, uncased_vocab, shared_data_dir, hf_pretrainer):
    transformers = require("transformers")
    sentences = (_masked_sentences(shared_data_dir, 12, 1, seed=0)
                 + _masked_sentences(shared_data_dir, 12, 2, seed=1))
    fill_mask = FillMask(_read(fixtures_dir, uncased_vocab).model,
                         FullTokenizer(str(uncased_vocab), True), batch_size=5)
    ours = fill_mask(sentences, top_k=5)
    pipeline = transformers.pipeline("fill-mask", model=str(hf_pretrainer), top_k=5,
                                     device="cpu")
    for sentence, predicted in zip(sentences, ours):
        theirs = pipeline(sentence)
        theirs = [theirs] if sentence.count(MASK) == 1 else theirs
        assert len(predicted) == len(theirs) == sentence.count(MASK)
        for mine, reference in zip(predicted, theirs):
            assert [s.token_id for s in mine] == [r["token"] for r in reference], sentence
            np.testing.assert_allclose([s.probability for s in mine],
                                       [r["score"] for r in reference], atol=1e-5)
            assert [s.token for s in mine] == [r["token_str"].replace(" ", "")
                                               for r in reference]


def test_fill_mask_of_several_masks_a_truncated_mask_and_a_line_without_one(
        fixtures_dir, uncased_vocab):
    fill_mask = FillMask(_read(fixtures_dir, uncased_vocab).model,
                         FullTokenizer(str(uncased_vocab), True), max_seq_length=8)
    texts = [f"the {MASK} sat on the {MASK} .", "no mask here",
             f"a b c d e f g {MASK}", f"un{MASK}{MASK} words"]
    results = fill_mask(texts, top_k=3)
    assert [len(r) for r in results] == [2, 0, 0, 2]      # the third's mask is cut off at 8
    assert all(len(scores) == 3 for r in results for scores in r)
    single = fill_mask([texts[0]], top_k=3)[0]
    for alone, together in zip(single, results[0]):
        assert [s.token_id for s in alone] == [s.token_id for s in together]
        np.testing.assert_allclose([s.probability for s in alone],
                                   [s.probability for s in together], atol=1e-6)


def test_a_max_seq_length_beyond_the_model_is_refused(fixtures_dir, uncased_vocab):
    loaded = _read(fixtures_dir, uncased_vocab)
    with pytest.raises(ValueError, match="max_seq_length=513 must be between 3 and the "
                                         "model's max_position_embeddings=512"):
        FillMask(loaded.model, FullTokenizer(str(uncased_vocab), True), max_seq_length=513)


def test_fill_mask_refuses_a_checkpoint_without_the_masked_lm_head(fixtures_dir, uncased_vocab):
    with pytest.raises(ValueError, match="without the masked-LM head.*classifier"):
        FillMask.from_checkpoint(str(tiny_dir(fixtures_dir) / "classifier/model.ckpt"),
                                 vocab_file=str(uncased_vocab),
                                 bert_config_file=str(tiny_dir(fixtures_dir) / "bert_config.json"))


def _hand_pooled(encoder, tokenizer, texts, pooling, normalize, max_seq_length=32):
    """Fixed padding, one call, and numpy pooling."""
    from data.features import stack, text_sequence
    arrays = stack([text_sequence(text, tokenizer, max_seq_length)[0] for text in texts])
    outputs = encoder({k: tf.constant(v) for k, v in arrays.items()}, training=False)
    sequence, mask = outputs["sequence_output"].numpy(), arrays["input_mask"][..., None]
    vectors = {"cls": sequence[:, 0], "pooler": outputs["pooled_output"].numpy(),
               "mean": (sequence * mask).sum(1) / mask.sum(1),
               "max": np.where(mask > 0, sequence, -np.inf).max(1)}[pooling]
    if normalize:
        vectors = vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors


TEXTS = ["A man is playing a guitar.", "", "The quick brown fox ||| jumps over the lazy dog",
         "word " * 40, "Short."]


@pytest.mark.parametrize("pooling", POOLINGS)
@pytest.mark.parametrize("normalize", [False, True])
def test_sentence_vectors_are_pooled_as_asked(fixtures_dir, uncased_vocab, pooling, normalize):
    encoder = _read(fixtures_dir, uncased_vocab).model.encoder
    tokenizer = FullTokenizer(str(uncased_vocab), True)
    embedder = SentenceEmbedder(encoder, tokenizer, pooling, normalize, max_seq_length=32,
                                batch_size=2)
    vectors = embedder(TEXTS)
    assert vectors.shape == (len(TEXTS), 128) and vectors.dtype == np.float32
    np.testing.assert_allclose(
        vectors, _hand_pooled(encoder, tokenizer, TEXTS, pooling, normalize), atol=1e-5)
    if normalize:
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=-1), 1.0, atol=1e-6)


def _sentence_transformers_folder(root, hf_folder, pooling_mode: str, normalize: bool):
    shutil.copytree(hf_folder, root)
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling",
                "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize",
                        "type": "sentence_transformers.models.Normalize"})
    (root / "modules.json").write_text(json.dumps(modules))
    (root / "1_Pooling").mkdir()
    (root / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": 128, **{f"pooling_mode_{mode}": mode == pooling_mode
         for mode in ("cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens")}}))
    (root / "sentence_bert_config.json").write_text(json.dumps(
        {"max_seq_length": 24, "do_lower_case": False}))
    return root


@pytest.mark.parametrize("pooling_mode,normalize", [("mean_tokens", True), ("cls_token", False),
                                                     ("max_tokens", True)])
def test_a_sentence_transformers_folder_brings_its_pooling_and_length(
        hf_pretrainer, tmp_path, pooling_mode, normalize):
    folder = _sentence_transformers_folder(tmp_path / "st", hf_pretrainer, pooling_mode,
                                           normalize)
    embedder = SentenceEmbedder.from_checkpoint(str(folder))
    assert embedder.max_seq_length == 24 and embedder.model.normalize is normalize
    singles = [text for text in TEXTS if " ||| " not in text]
    vectors = embedder(singles)
    # The reference: transformers' BertModel on transformers' tokenizer, pooled by hand.
    transformers = require("transformers")
    model, _ = load_hf_model("BertModel", folder)
    encoded = transformers.BertTokenizerFast.from_pretrained(str(folder))(
        singles, max_length=24, truncation=True, padding="max_length", return_tensors="np")
    hidden = run_hf(model, encoded["input_ids"], encoded["attention_mask"],
                    encoded["token_type_ids"])["last_hidden_state"]
    mask = encoded["attention_mask"][..., None]
    expected = {"cls_token": hidden[:, 0], "mean_tokens": (hidden * mask).sum(1) / mask.sum(1),
                "max_tokens": np.where(mask > 0, hidden, -1e9).max(1)}[pooling_mode]
    if normalize:
        expected = expected / np.linalg.norm(expected, axis=-1, keepdims=True)
    np.testing.assert_allclose(vectors, expected, atol=1e-5)


def test_unsupported_sentence_transformers_pooling_is_refused(hf_pretrainer, tmp_path):
    folder = _sentence_transformers_folder(tmp_path / "st", hf_pretrainer,
                                           "mean_sqrt_len_tokens", False)
    with pytest.raises(ValueError, match="1_Pooling/config.json: pooling.*mean_sqrt_len"):
        SentenceEmbedder.from_checkpoint(str(folder))


def test_fill_mask_reads_a_checkpoint_with_the_masked_lm_head_alone(fixtures_dir, uncased_vocab,
                                                                   tmp_path):
    """The TF2-era releases carry the masked-LM head without the next-sentence one."""
    pretrainer = _read(fixtures_dir, uncased_vocab).model
    values = {name: variable.numpy() for name, variable in tf1_name_map(pretrainer).items()
              if not name.startswith("cls/seq_relationship")}
    masked_lm = build_model(pretrainer.config, ModelSpec("masked_lm"))
    assign_tf1_values(masked_lm, values, "test")
    prefix = checkpoints.save_tf1_checkpoint(masked_lm, str(tmp_path / "bert_model.ckpt"))
    shutil.copyfile(tiny_dir(fixtures_dir) / "bert_config.json", tmp_path / "bert_config.json")
    alone = FillMask.from_checkpoint(prefix, vocab_file=str(uncased_vocab))
    assert checkpoints.model_spec(alone.pretrainer) == ModelSpec("masked_lm")
    texts = [f"the {MASK} sat on the {MASK} .", f"paris is the {MASK} of france ."]
    full = FillMask(pretrainer, FullTokenizer(str(uncased_vocab), True))
    for mine, expected in zip(alone(texts), full(texts)):
        for scores, reference in zip(mine, expected, strict=True):
            assert [s.token_id for s in scores] == [s.token_id for s in reference]
            np.testing.assert_allclose([s.probability for s in scores],
                                       [s.probability for s in reference], atol=1e-6)


def _wikitext_words(shared_data_dir, count: int) -> list[str]:
    """The first `count` words of WikiText-2's test sentences."""
    path = shared_data_dir / "wikitext-2-raw" / "wiki.test.sentences.txt"
    return path.read_text(encoding="utf-8").split()[:count]


def _piece_tagger(config, labels):
    """A token classifier whose logits at a position depend on that position's piece alone: no
    position embeddings, nothing added by attention or the feed-forward layers. Label 0 (O, what
    a word cut off by truncation gets) is never predicted."""
    keras.utils.set_random_seed(0)
    model = build_model(config, ModelSpec("token_classifier", len(labels)))
    for name, variable in tf1_name_map(model).items():
        if "position_embeddings" in name or "/output/dense/" in name:
            variable.assign(tf.zeros_like(variable))
        elif name == "cls/token_classifier/output_bias":
            variable.assign([-100.0] + [0.0] * (len(labels) - 1))
    return model


def test_windows_tag_every_word_of_a_long_sentence_as_one_long_sequence_would(
        fixtures_dir, uncased_vocab, shared_data_dir, caplog):
    config = _read(fixtures_dir, uncased_vocab).model.config
    labels = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    model = _piece_tagger(config, labels)
    tokenizer = FullTokenizer(str(uncased_vocab), True)
    long_text = " ".join(_wikitext_words(shared_data_dir, 300))
    assert 300 < len(tokenizer.tokenize(long_text)) < 510
    texts = ["A short one .", long_text, ""]
    whole = EntityTagger(model, tokenizer, labels, max_seq_length=512)(texts)
    for max_seq_length, doc_stride in [(16, 5), (16, None), (40, 100)]:
        with caplog.at_level("INFO"):
            windowed = EntityTagger(model, tokenizer, labels, max_seq_length=max_seq_length,
                                    doc_stride=doc_stride, batch_size=7)(texts)
        assert windowed == whole
        assert "1 of 3 texts were longer than max_seq_length" in caplog.text
        caplog.clear()
    tags = [w.tag for w in whole[1]]
    assert len(tags) == 300 and "O" not in tags and len(set(tags)) > 1


def _hand_window_tags(model, tokenizer, labels, words, max_seq_length, stride):
    """Each word's tag from the window where its first piece has the most context (the highest
    min(pieces left, pieces right) + 0.01 * the window's length, the earliest on a tie), and
    from the first window that holds it: windows of max_seq_length - 2 pieces every `stride`."""
    pieces, firsts = [], []
    for word in words:
        firsts.append(len(pieces))
        pieces += tokenizer.tokenize(word)
    room = max_seq_length - 2
    starts = [0]
    while starts[-1] + room < len(pieces):
        starts.append(starts[-1] + stride)
    ids = []
    for start in starts:
        tokens = ["[CLS]", *pieces[start:start + room], "[SEP]"]
        ids.append(tokenizer.convert_tokens_to_ids(tokens) + [0] * (max_seq_length - len(tokens)))
    ids = np.array(ids, np.int32)
    logits = model({"input_ids": ids, "input_mask": (ids > 0).astype(np.int32),
                    "segment_ids": np.zeros_like(ids)}, training=False)["logits"].numpy()

    def tag_in(window, position):
        return labels[logits[window, 1 + position - starts[window]].argmax()]

    most_context, first_window = [], []
    for position in firsts:
        holding = [i for i, start in enumerate(starts)
                   if start <= position < min(start + room, len(pieces))]
        lengths = {i: min(room, len(pieces) - starts[i]) for i in holding}
        best = max(holding, key=lambda i: (min(position - starts[i],
                                               starts[i] + lengths[i] - 1 - position)
                                           + 0.01 * lengths[i], -i))
        most_context.append(tag_in(best, position))
        first_window.append(tag_in(holding[0], position))
    return most_context, first_window


def test_windows_give_each_word_the_tag_of_its_window_of_most_context(
        fixtures_dir, uncased_vocab, shared_data_dir):
    """With a tagger whose tags depend on the context, each word's tag is the one its window of
    most context gives; the first window holding it would give other tags."""
    config = _read(fixtures_dir, uncased_vocab).model.config
    labels = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    keras.utils.set_random_seed(5)
    model = build_model(BertConfig.from_dict({**config.to_dict(), "initializer_range": 0.5}),
                        ModelSpec("token_classifier", len(labels)))
    tokenizer = FullTokenizer(str(uncased_vocab), True)
    words = _wikitext_words(shared_data_dir, 40)
    for max_seq_length, doc_stride in [(16, 5), (20, 3)]:
        expected, first_window = _hand_window_tags(model, tokenizer, labels, words,
                                                   max_seq_length, doc_stride)
        tagged = EntityTagger(model, tokenizer, labels, max_seq_length=max_seq_length,
                              doc_stride=doc_stride, batch_size=4)([" ".join(words)])
        assert [w.word for w in tagged[0]] == words
        assert [w.tag for w in tagged[0]] == expected
        assert first_window != expected


def test_words_of_sentences_that_fit_are_tagged_as_without_windows(fixtures_dir, uncased_vocab):
    from data.ner import conll, features as ner_features
    from tasks import ner
    config = _read(fixtures_dir, uncased_vocab).model.config
    labels = ["O", "B-PER", "I-PER"]
    keras.utils.set_random_seed(3)
    model = build_model(config, ModelSpec("token_classifier", len(labels)))
    tokenizer = FullTokenizer(str(uncased_vocab), True)
    texts = ["John lives in Paris", "word " * 5, "Ann met Bob at the old harbour today"]
    documents = [conll.ConllDocument((conll.ConllSentence(tuple(
        conll.ConllToken(word, "O") for word in text.split()), 1),)) for text in texts]
    cut = ner_features.convert_documents_to_features(documents, tokenizer, labels, 16)
    expected, _ = ner.tag(model, cut, labels, batch_size=2)
    tagged = EntityTagger(model, tokenizer, labels, max_seq_length=16, doc_stride=3,
                          batch_size=2)(texts)
    assert [[w.tag for w in words] for words in tagged] == expected


# 30 words of one piece each.
_LONG = ("the man went to the store and bought a gallon of milk then he walked home along the "
         "river where his dog was waiting for him in the old house")


def _hand_outputs(model, tokenizer, sequences, max_seq_length):
    """The classifier's softmax (regression: its prediction) on `[CLS] a [SEP] (b [SEP])` for
    each (a, b) token lists, zero-padded, in one call."""
    ids, segments = [], []
    for tokens_a, tokens_b in sequences:
        tokens = ["[CLS]", *tokens_a, "[SEP]"] + ([*tokens_b, "[SEP]"] if tokens_b else [])
        padding = [0] * (max_seq_length - len(tokens))
        ids.append(tokenizer.convert_tokens_to_ids(tokens) + padding)
        segments.append([0] * (len(tokens_a) + 2) + [1] * (len(tokens) - len(tokens_a) - 2)
                        + padding)
    ids = np.array(ids, np.int32)
    logits = model({"input_ids": ids, "input_mask": (ids > 0).astype(np.int32),
                    "segment_ids": np.array(segments, np.int32)}, training=False)["logits"]
    return logits.numpy()[:, 0] if model.num_labels == 1 else tf.nn.softmax(logits).numpy()


@pytest.fixture(scope="module")
def tiny_classifier(fixtures_dir, uncased_vocab):
    loaded = checkpoints.read_model(str(tiny_dir(fixtures_dir) / "classifier/model.ckpt"), "tf1",
                                    str(tiny_dir(fixtures_dir) / "bert_config.json"),
                                    str(uncased_vocab))
    return loaded.model, FullTokenizer(str(uncased_vocab), True)


def test_texts_that_fit_get_the_probabilities_of_one_sequence(tiny_classifier):
    from data.features import stack
    model, tokenizer = tiny_classifier
    texts = ["a fine film", "", "he said so ||| so he said", " ".join(_LONG.split()[:14])]
    classifier = TextClassifier(model, tokenizer, max_seq_length=16, doc_stride=3, batch_size=3)
    # The path without windows: the texts truncated to one sequence each (none is cut here).
    logits = classifier._predict(model, stack(classifier._features(texts, tokenizer)))["logits"]
    expected = tf.nn.softmax(logits).numpy()
    answers = classifier(texts)
    np.testing.assert_array_equal([list(a.probabilities.values()) for a in answers], expected)
    assert [a.label for a in answers] == [classifier.labels[i] for i in expected.argmax(1)]


def test_a_long_text_gets_the_mean_of_its_windows_probabilities(tiny_classifier, caplog):
    model, tokenizer = tiny_classifier
    pieces = tokenizer.tokenize(_LONG)
    assert len(pieces) == 30
    question = tokenizer.tokenize("who went home ?")
    classifier = TextClassifier(model, tokenizer, max_seq_length=16, doc_stride=4, batch_size=4)
    with caplog.at_level("INFO"):
        single, pair, short = classifier([_LONG, f"who went home ? ||| {_LONG}", "a fine film"])
    assert "2 of 3 texts were longer than max_seq_length=16: read in 12 windows" in caplog.text
    # 14 tokens of room, every 4 tokens: windows 0-13, 4-17, ..., 16-29.
    windows = [(pieces[start:start + 14], []) for start in (0, 4, 8, 12, 16)]
    np.testing.assert_allclose(list(single.probabilities.values()),
                               _hand_outputs(model, tokenizer, windows, 16).mean(0), atol=1e-6)
    # A pair: the question in every window, 13 - 4 = 9 tokens of the context, every 4 tokens.
    windows = [(question, pieces[start:start + 9]) for start in range(0, 25, 4)]
    np.testing.assert_allclose(list(pair.probabilities.values()),
                               _hand_outputs(model, tokenizer, windows, 16).mean(0), atol=1e-6)
    np.testing.assert_allclose(
        list(short.probabilities.values()),
        _hand_outputs(model, tokenizer, [(tokenizer.tokenize("a fine film"), [])], 16)[0],
        atol=1e-6)


def test_a_regression_model_averages_its_windows_predictions(tiny_classifier):
    model, tokenizer = tiny_classifier
    keras.utils.set_random_seed(5)
    regression = build_model(model.config, ModelSpec("classifier", 1))
    pieces = tokenizer.tokenize(_LONG)
    answer, = TextClassifier(regression, tokenizer, max_seq_length=32, doc_stride=10)([_LONG])
    # 30 tokens of room: the 30 pieces are one sequence. At 16, 14 of room: three windows.
    assert answer.probabilities is None
    np.testing.assert_allclose(answer.prediction, _hand_outputs(
        regression, tokenizer, [(pieces, [])], 32)[0], atol=1e-6)
    answer, = TextClassifier(regression, tokenizer, max_seq_length=16, doc_stride=10)([_LONG])
    windows = [(pieces[start:start + 14], []) for start in (0, 10, 20)]
    np.testing.assert_allclose(answer.prediction, _hand_outputs(
        regression, tokenizer, windows, 16).mean(), atol=1e-6)
