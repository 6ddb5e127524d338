"""A model on new text from Python: fill-mask against the original's masked-LM outputs and
transformers' fill-mask pipeline, sentence vectors against hand pooling and transformers."""
import json
import shutil

import numpy as np
import pytest
import tensorflow as tf

from data.tokenization import FullTokenizer
from modeling import checkpoints
from modeling.checkpoints import ModelSpec, build_model
from modeling.checkpoints.names import tf1_name_map
from modeling.checkpoints.tf1 import assign_tf1_values
from modeling.text_heads import POOLINGS, MaskedTokenPredictor
from tasks.embedding import SentenceEmbedder
from tasks.fill_mask import MASK, FillMask
from tasks.ner import EntityTagger
from tests.hf_reference import load_hf_model, require, run_hf
from tests.modeling_fixtures import golden, golden_inputs, tiny_dir

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
    from data.feature_extraction import convert_example, features_to_arrays, text_example
    features = [convert_example(text_example(i, t), max_seq_length, tokenizer)
                for i, t in enumerate(texts)]
    arrays = features_to_arrays(features)
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


def test_a_sentence_longer_than_max_seq_length_has_its_last_words_tagged_outside(
        fixtures_dir, uncased_vocab, caplog):
    config = checkpoints.read_model(str(tiny_dir(fixtures_dir) / ORIGINAL), "tf1",
                                    str(tiny_dir(fixtures_dir) / "bert_config.json"),
                                    str(uncased_vocab)).model.config
    labels = ["O", "B-PER", "I-PER"]
    tagger = EntityTagger(build_model(config, ModelSpec("token_classifier", len(labels))),
                          FullTokenizer(str(uncased_vocab), False), labels, max_seq_length=6)
    with caplog.at_level("INFO"):
        short, long = tagger(["John lives here", "John lives in a big old house"])
    assert [w.word for w in long] == "John lives in a big old house".split()
    assert [w.tag for w in long][4:] == ["O", "O", "O"]   # [CLS] + 4 words + [SEP] fit in 6
    assert all(w.tag in labels for w in short + long)
    assert "1 of 2 texts were longer than max_seq_length=6" in caplog.text
