"""Tests of the cached per-word encoder features: values, cache reuse, padded batches, and their
training dataset and prediction through `running.batching.HostExamples`."""
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling.config import BertConfig
from data.ner import feature_cache
from modeling.models.bilstm_tagger import BiLstmTagger
from modeling.models.encoder import BertEncoder
from running.batching import HostExamples
from running import prediction

_CONFIG = BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=3, num_attention_heads=2,
                     intermediate_size=16, max_position_embeddings=16, type_vocab_size=2)


def _hand_made():
    # Sentence 0: words 0-2; sentence 1: word 3; sentence 2: words 4-5.
    values = np.arange(6 * 2, dtype=np.float32).reshape(6, 2) + 1.0
    return feature_cache.WordFeatures(values=values, offsets=np.array([0, 3, 4, 6]))


def test_batch_pads_features_mask_and_labels():
    features = _hand_made()
    assert (features.num_sentences, features.feature_size, features.max_words) == (3, 2, 3)
    batch = features.batch([2, 1], word_values=np.array([10, 11, 12, 13, 14, 15]))
    np.testing.assert_array_equal(batch["features"], [[[9, 10], [11, 12]], [[7, 8], [0, 0]]])
    np.testing.assert_array_equal(batch["word_mask"], [[1, 1], [1, 0]])
    np.testing.assert_array_equal(batch["label_ids"], [[14, 15], [13, -1]])
    wide = features.batch([1], num_words=3)
    assert wide["features"].shape == (1, 3, 2) and "label_ids" not in wide


def test_cache_key_depends_on_every_part_not_on_order():
    parts = {"checkpoint": "abc", "layers": [-1, -2], "max_seq_length": 128}
    key = feature_cache.cache_key(parts)
    assert key == feature_cache.cache_key(dict(reversed(list(parts.items()))))
    for name, other in (("checkpoint", "abd"), ("layers", [-2, -1]), ("max_seq_length", 64)):
        assert feature_cache.cache_key({**parts, name: other}) != key


def _encoder():
    keras.utils.set_random_seed(3)
    return BertEncoder(_CONFIG)


def _arrays():
    rng = np.random.default_rng(0)
    input_ids = rng.integers(4, 20, size=(3, 8)).astype(np.int32)
    input_mask = np.array([[1] * 8, [1] * 5 + [0] * 3, [1] * 3 + [0] * 5], np.int32)
    return {"input_ids": input_ids * input_mask, "input_mask": input_mask,
            "segment_ids": np.zeros_like(input_ids)}


# Word first-piece positions; -1: a word without a piece in its sequence.
_POSITIONS = [np.array([1, 2, 4, 6]), np.array([1, 3, -1]), np.array([1])]


def test_features_are_the_chosen_layers_at_first_pieces_and_are_reused(tmp_path):
    encoder = _encoder()
    calls = []

    def encode():
        calls.append(1)
        arrays = _arrays()
        for start in (0, 2):  # two batches
            outputs = encoder({k: v[start:start + 2] for k, v in arrays.items()},
                              training=False)["encoder_outputs"]
            yield np.concatenate([outputs[-1].numpy(), outputs[0].numpy()], axis=-1)

    args = (str(tmp_path), "key", {"what": "test"}, encode, _POSITIONS, 16)
    features = feature_cache.cached_word_features(*args)
    assert calls == [1]
    np.testing.assert_array_equal(features.offsets, [0, 4, 7, 8])
    outputs = encoder(_arrays(), training=False)["encoder_outputs"]
    expected = np.concatenate([outputs[2].numpy(), outputs[0].numpy()], axis=-1)  # [N, T, 2H]
    rows = [expected[0, [1, 2, 4, 6]], expected[1, [1, 3]], np.zeros((1, 16)), expected[2, [1]]]
    np.testing.assert_allclose(features.values, np.concatenate(rows), atol=1e-6)

    path = tmp_path / "key" / "features.npy"
    stamp = os.stat(path).st_mtime_ns
    again = feature_cache.cached_word_features(*args)
    assert calls == [1], "a cache hit must not run the encoder"
    assert os.stat(path).st_mtime_ns == stamp
    assert isinstance(again.values, np.memmap)
    np.testing.assert_array_equal(again.values, features.values)
    assert sorted(os.listdir(tmp_path)) == ["key"]


def test_failed_computation_leaves_no_entry(tmp_path):
    def broken():
        raise RuntimeError("no checkpoint")

    with pytest.raises(RuntimeError):
        feature_cache.cached_word_features(str(tmp_path), "key", {}, broken, _POSITIONS, 8)
    assert os.listdir(tmp_path) == []


def _examples(features, labels=None) -> HostExamples:
    return HostExamples(features.num_sentences, lambda rows: features.batch(rows, labels),
                        features.batch_signature(labels is not None))


def test_training_dataset_shuffles_whole_sentences_and_restores_its_position(tmp_path):
    features = _hand_made()
    labels = np.array([10, 11, 12, 13, 14, 15], np.int32)
    dataset = _examples(features, labels).training_dataset_fn(3, seed=1)(
        tf.distribute.InputContext())
    iterator = iter(dataset)
    first = next(iterator)
    assert first["features"].shape == (3, 3, 2)  # the longest sentence has 3 words
    seen = sorted(int(row[0]) for row, mask in zip(first["label_ids"].numpy(),
                                                   first["word_mask"].numpy()) if mask[0])
    assert seen == [10, 13, 14], "an epoch of 3 sentences covers each once"
    for row in range(3):
        length = int(first["word_mask"][row].numpy().sum())
        assert (first["label_ids"][row, length:].numpy() == -1).all()
    checkpoint = tf.train.Checkpoint(iterator=iterator)
    path = checkpoint.save(str(tmp_path / "ckpt"))
    expected = next(iterator)
    checkpoint.restore(path)
    np.testing.assert_array_equal(next(iterator)["label_ids"], expected["label_ids"])


def test_predict_words_runs_sentences_independently():
    features = _hand_made()
    keras.utils.set_random_seed(0)
    tagger = BiLstmTagger(2, 3, lstm_units=4)
    logits = prediction.predict(
        tagger, _examples(features), batch_size=2,
        output_fn=lambda outputs, batch: {"logits": tf.boolean_mask(outputs["logits"],
                                                                    batch["word_mask"] > 0)}
    )["logits"]
    assert logits.shape == (6, 3)
    for index in range(3):
        alone = tagger(features.batch([index]), training=False)["logits"].numpy()[0]
        start, end = features.offsets[index], features.offsets[index + 1]
        np.testing.assert_allclose(logits[start:end], alone, atol=1e-5)
