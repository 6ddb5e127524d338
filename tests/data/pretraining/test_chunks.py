"""Tests of data/pretraining/chunks.py: one chunk's records, counts and seeding."""
import numpy as np
import tensorflow as tf

from data import tfrecord_schema as schema
from data.pretraining import chunks as pretraining_chunks
from data.pretraining.corpus import CorpusChunk
from data.pretraining.instances import PretrainingConfig

DOCUMENTS = [["The cat sat on the mat.", "It was happy there.", "Then it left."],
             ["\x01\x02"],  # no token: an empty document
             ["Dogs bark at night.", "\x03", "Birds sing in the morning.", "Fish swim."]]


def _settings(vocab, seed=1, **config):
    return pretraining_chunks.ChunkSettings(str(vocab), True,
                                            PretrainingConfig(dupe_factor=4, **config), seed)


def test_chunk_counts_and_records(uncased_vocab):
    processor = pretraining_chunks.ChunkProcessor(_settings(uncased_vocab))
    result = processor.process(CorpusChunk(3, DOCUMENTS, 123))
    assert (result.index, result.num_bytes, result.documents) == (3, 123, 2)
    assert (result.empty_documents, result.lines_without_tokens) == (1, 2)
    assert result.tokens == 16 + 14  # every word of these lines is one vocabulary token
    assert len(result.records) >= 2 * 4  # every document gives an instance per pass
    for record in result.records:  # the framing: 8-byte length, 4-byte checksum, data, checksum
        assert int.from_bytes(record[:8], "little") == len(record) - 16
    parsed = tf.io.parse_example([r[12:-4] for r in result.records],
                                 schema.pretraining_feature_spec(128, 20))
    assert np.all(parsed["input_ids"][:, 0].numpy() == 101)  # [CLS]
    assert set(parsed["input_ids"].numpy().ravel()) >= {102, 103}  # [SEP], [MASK]


def test_chunk_output_depends_on_seed_and_index_only(uncased_vocab):
    chunk = CorpusChunk(5, DOCUMENTS, 10)
    first = pretraining_chunks.ChunkProcessor(_settings(uncased_vocab)).process(chunk)
    other_processor = pretraining_chunks.ChunkProcessor(_settings(uncased_vocab))
    other_processor.process(CorpusChunk(0, DOCUMENTS[:1], 5))  # a different history
    assert other_processor.process(chunk).records == first.records
    moved = pretraining_chunks.ChunkProcessor(_settings(uncased_vocab)).process(
        CorpusChunk(6, DOCUMENTS, 10))
    reseeded = pretraining_chunks.ChunkProcessor(_settings(uncased_vocab, seed=2)).process(chunk)
    assert moved.records != first.records and reseeded.records != first.records


def test_a_chunk_without_tokens_gives_no_record(uncased_vocab):
    result = pretraining_chunks.ChunkProcessor(_settings(uncased_vocab)).process(
        CorpusChunk(0, [["\x01"], ["\x02 \x03"]], 12))
    assert result.records == [] and result.empty_documents == 2
