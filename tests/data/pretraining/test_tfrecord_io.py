"""Tests of data/pretraining/tfrecord_io.py: CRC32C test vectors, byte equality with TensorFlow's writer,
atomic files and the removal of the temporary files that killed writers leave."""
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from data.pretraining import tfrecord_io
from tests.support.paths import REPO_ROOT


@pytest.mark.parametrize("data, expected", [
    (b"123456789", 0xE3069283),  # the CRC-32C check value
    (bytes(32), 0x8A9136AA),  # RFC 3720 (iSCSI) B.4 test vectors
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
    (b"", 0x0),
])
def test_crc32c_test_vectors(data, expected):
    assert tfrecord_io.crc32c(data) == expected


def test_frame_records_equals_tensorflow_writer(tmp_path):
    rng = np.random.default_rng(1)
    records = [rng.integers(0, 256, n, dtype=np.uint8).tobytes()
               for n in rng.integers(0, 900, 300)] + [b"", b"a"]
    path = str(tmp_path / "tf.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for record in records:
            writer.write(record)
    data, ends = tfrecord_io.frame_records(records)
    with open(path, "rb") as reader:
        assert data == reader.read()
    assert ends[0] == 0 and ends[-1] == len(data) and len(ends) == len(records) + 1
    pieces = tfrecord_io.split_framed(data, ends)
    assert [len(p) - 16 for p in pieces] == [len(r) for r in records]
    assert tfrecord_io.frame_records([]) == (b"", [0])


def test_atomic_record_file_appears_only_on_commit(tmp_path):
    path = tmp_path / "out.tfrecord"
    output = tfrecord_io.AtomicRecordFile(str(path))
    output.write_framed(tfrecord_io.split_framed(*tfrecord_io.frame_records([b"one", b"two"])))
    assert not path.exists()
    assert len(os.listdir(tmp_path)) == 1  # the hidden temporary file
    output.commit()
    assert os.listdir(tmp_path) == ["out.tfrecord"]
    assert [r.numpy() for r in tf.data.TFRecordDataset(str(path))] == [b"one", b"two"]
    assert output.num_records == 2
    plain = tmp_path / "plain"
    plain.write_bytes(b"")
    assert path.stat().st_mode == plain.stat().st_mode  # not mkstemp's private 0600


def test_atomic_record_file_abort_leaves_nothing(tmp_path):
    (tmp_path / "out.tfrecord").write_bytes(b"previous")
    output = tfrecord_io.AtomicRecordFile(str(tmp_path / "out.tfrecord"))
    output.write_framed(tfrecord_io.split_framed(*tfrecord_io.frame_records([b"partial"])))
    output.abort()
    assert os.listdir(tmp_path) == ["out.tfrecord"]
    assert (tmp_path / "out.tfrecord").read_bytes() == b"previous"


# A writer that dies without committing or aborting (argv: output path, optional host name).
_DYING_WRITER = f"""
import os, socket, sys
sys.path.insert(0, {str(REPO_ROOT)!r})
if len(sys.argv) > 2:
    socket.gethostname = lambda: sys.argv[2]
from data.pretraining import tfrecord_io
tfrecord_io.AtomicRecordFile(sys.argv[1]).write_framed([b"partial"])
os._exit(0)
"""


def _temporary_files(folder):
    return sorted(str(p) for p in folder.iterdir() if p.name.endswith(".incomplete"))


def _new_temporary_file(folder, start_writer):
    """The one temporary file that appears in `folder` while `start_writer()` runs."""
    before = set(_temporary_files(folder))
    start_writer()
    (new,) = set(_temporary_files(folder)) - before
    return new


def _die_writing(path, host=None):
    """The temporary file a process left when it died writing `path`."""
    return _new_temporary_file(path.parent, lambda: subprocess.run(
        [sys.executable, "-c", _DYING_WRITER, str(path), *([host] if host else [])], check=True))


def test_stale_temporary_files_of_dead_writers_are_removed(tmp_path):
    path = tmp_path / "out.tfrecord"
    path.write_bytes(b"previous")
    dead = [_die_writing(path), _die_writing(path)]
    other_host = _die_writing(path, host="some-other.machine")
    writers = []
    live = _new_temporary_file(tmp_path, lambda: writers.append(
        tfrecord_io.AtomicRecordFile(str(path))))  # this process: running
    other_output = _die_writing(tmp_path / "out.tfrecord.1")
    removed, kept = tfrecord_io.remove_stale_temporary_files(str(path))
    assert removed == sorted(dead)
    assert sorted(kept) == sorted([other_host, live])
    assert _temporary_files(tmp_path) == sorted([other_host, live, other_output])
    assert path.read_bytes() == b"previous"
    writers[0].abort()
    assert tfrecord_io.remove_stale_temporary_files(str(path)) == ([], [other_host])
    assert tfrecord_io.remove_stale_temporary_files(str(tmp_path / "none" / "x")) == ([], [])
