"""Tests of data/pretraining/writer.py: shuffle buffer, round-robin files, atomic output."""
import numpy as np
import pytest

from data.pretraining import chunks, writer as pretraining_writer
from data.pretraining.instances import PretrainingConfig
from tests.support import pretraining_statistics as stats


def test_shuffle_buffer_releases_every_record_once_in_seeded_order():
    def run(seed):
        buffer = pretraining_writer.ShuffleBuffer(10, np.random.default_rng(seed))
        released = []
        for start in range(0, 100, 7):
            out = buffer.add([bytes([i]) for i in range(start, min(start + 7, 100))])
            assert len(buffer._records) <= 10
            released += out
        return released + buffer.drain()

    first = run(0)
    assert sorted(first) == [bytes([i]) for i in range(100)]
    assert first == run(0) and first != run(1)
    assert first != sorted(first)
    passthrough = pretraining_writer.ShuffleBuffer(0, np.random.default_rng(0))
    assert sorted(passthrough.add([b"a", b"b"])) == [b"a", b"b"]


def test_options_are_checked():
    pretraining_writer.WriterOptions().validate()
    with pytest.raises(ValueError, match="num_workers"):
        pretraining_writer.WriterOptions(num_workers=-1).validate()
    with pytest.raises(ValueError, match="chunk_bytes"):
        pretraining_writer.WriterOptions(chunk_bytes=0).validate()


def test_records_are_dealt_round_robin_in_release_order(tmp_path, fixtures_dir,
                                                        uncased_vocab):
    corpus = fixtures_dir / "pretraining_data" / "sample_text.txt"
    settings = chunks.ChunkSettings(
        str(uncased_vocab), True, PretrainingConfig(dupe_factor=3), 3)
    outputs = [str(tmp_path / f"{i}.tfrecord") for i in range(3)]
    one = str(tmp_path / "one.tfrecord")
    options = pretraining_writer.WriterOptions(shuffle_buffer_size=5)
    summary = pretraining_writer.write_pretraining_records([str(corpus)], outputs, settings,
                                                           options)
    pretraining_writer.write_pretraining_records([str(corpus)], [one], settings, options)
    single = stats.read_records([one], 128, 20)["input_ids"]
    dealt = [stats.read_records([path], 128, 20)["input_ids"] for path in outputs]
    for index, rows in enumerate(dealt):
        np.testing.assert_array_equal(rows, single[index::3])
    assert summary.instances_per_file == [len(rows) for rows in dealt]
    assert summary.instances == len(single) and summary.documents == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0.tfrecord", "1.tfrecord",
                                                          "2.tfrecord", "one.tfrecord"]


def test_a_failing_run_removes_its_temporary_files(tmp_path, fixtures_dir, uncased_vocab):
    """The second input cannot be read: the first one's records are already written."""
    corpus = str(fixtures_dir / "pretraining_data" / "sample_text.txt")
    (tmp_path / "directory").mkdir()
    settings = chunks.ChunkSettings(str(uncased_vocab), True, PretrainingConfig(), 1)
    options = pretraining_writer.WriterOptions(chunk_bytes=100, min_chunk_documents=1,
                                               shuffle_buffer_size=0)
    with pytest.raises(IsADirectoryError):
        pretraining_writer.write_pretraining_records(
            [corpus, str(tmp_path / "directory")], [str(tmp_path / "out.tfrecord")], settings,
            options)
    assert [p.name for p in tmp_path.iterdir()] == ["directory"]


def test_settings_are_checked_before_any_file_is_opened(tmp_path, uncased_vocab):
    settings = chunks.ChunkSettings(str(uncased_vocab), True,
                                                PretrainingConfig(max_seq_length=4), 1)
    with pytest.raises(ValueError, match="max_seq_length=4"):
        pretraining_writer.write_pretraining_records(
            [str(uncased_vocab)], [str(tmp_path / "out.tfrecord")], settings,
            pretraining_writer.WriterOptions())
    assert list(tmp_path.iterdir()) == []
