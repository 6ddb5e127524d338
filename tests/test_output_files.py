"""Tests of utils/output_files.py: atomic writes that name the output when they fail."""
import errno
import resource

import pytest

from utils.output_files import write_text_atomically


def test_a_rewrite_replaces_the_file_whole(tmp_path):
    path = tmp_path / "predictions.json"
    write_text_atomically(path, "first\n")
    write_text_atomically(path, "second\n")
    assert path.read_text() == "second\n"
    assert [p.name for p in tmp_path.iterdir()] == ["predictions.json"]


def test_a_write_that_fails_names_the_output_and_keeps_the_earlier_file(tmp_path):
    """A file-size limit (EFBIG), as a full disk (ENOSPC) would: the earlier file stays whole."""
    path = tmp_path / "predictions.json"
    write_text_atomically(path, "earlier\n")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1000, hard))
    try:
        with pytest.raises(OSError, match=rf"writing {path} failed: File too large") as failure:
            write_text_atomically(path, "x" * 100_000)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert failure.value.errno == errno.EFBIG
    assert path.read_text() == "earlier\n"
    assert [p.name for p in tmp_path.iterdir()] == ["predictions.json"]


def test_an_unwritable_folder_is_named(tmp_path):
    with pytest.raises(OSError, match="no_such_folder"):
        write_text_atomically(tmp_path / "no_such_folder" / "eval_results.txt", "x\n")
