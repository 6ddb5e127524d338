"""Tests of utils/output_files.py: atomic writes that name the output when they fail."""
import errno
import resource

import pytest

from utils.output_files import write_text_atomically, written_together


def test_a_rewrite_replaces_the_file_whole(tmp_path):
    path = tmp_path / "predictions.json"
    write_text_atomically(path, "first\n")
    write_text_atomically(path, "second\n")
    assert path.read_text() == "second\n"
    assert [p.name for p in tmp_path.iterdir()] == ["predictions.json"]


# 100,000 bytes fail in the write itself; 3,000 wait in the file's buffer and fail when it is
# flushed, and again when the temporary file is closed.
@pytest.mark.parametrize("size", [100_000, 3_000])
def test_a_write_that_fails_names_the_output_and_keeps_the_earlier_file(tmp_path, size):
    """A file-size limit (EFBIG), as a full disk (ENOSPC) would: the earlier file stays whole."""
    path = tmp_path / "predictions.json"
    write_text_atomically(path, "earlier\n")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1000, hard))
    try:
        with pytest.raises(OSError, match=rf"writing {path} failed: File too large") as failure:
            write_text_atomically(path, "x" * size)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert failure.value.errno == errno.EFBIG
    assert path.read_text() == "earlier\n"
    assert [p.name for p in tmp_path.iterdir()] == ["predictions.json"]


def test_an_unwritable_folder_is_named(tmp_path):
    with pytest.raises(OSError, match="no_such_folder"):
        write_text_atomically(tmp_path / "no_such_folder" / "eval_results.txt", "x\n")


def test_files_written_together_take_their_names_at_the_end_of_the_block(tmp_path):
    predictions, scores = tmp_path / "predictions.json", tmp_path / "scores.json"
    with written_together():
        write_text_atomically(predictions, "new predictions\n")
        with written_together():  # an inner group waits for the outer one
            write_text_atomically(scores, "new scores\n")
        assert not predictions.exists() and not scores.exists()
        assert len(list(tmp_path.glob("*.tmp"))) == 2  # complete, under temporary names
    assert predictions.read_text() == "new predictions\n"
    assert scores.read_text() == "new scores\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["predictions.json", "scores.json"]


def test_files_written_together_are_all_dropped_when_the_block_fails(tmp_path):
    predictions, scores = tmp_path / "predictions.json", tmp_path / "scores.json"
    predictions.write_text("earlier predictions\n")
    scores.write_text("earlier scores\n")
    with pytest.raises(KeyboardInterrupt):
        with written_together():
            write_text_atomically(predictions, "new predictions\n")
            raise KeyboardInterrupt  # e.g. a signal before the scores are written
    assert predictions.read_text() == "earlier predictions\n"
    assert scores.read_text() == "earlier scores\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["predictions.json", "scores.json"]
    write_text_atomically(predictions, "after the block\n")  # outside a group again
    assert predictions.read_text() == "after the block\n"


def test_folders_are_written_whole_or_not_at_all(tmp_path):
    from utils.output_files import atomic_output_folder, replaced_folder
    output = tmp_path / "model"
    with atomic_output_folder(str(output)) as folder:
        assert not output.exists()  # not visible before it is complete
        with open(f"{folder}/a.txt", "w") as f:
            f.write("first")
    assert (output / "a.txt").read_text() == "first"
    with pytest.raises(RuntimeError):
        with replaced_folder(str(output)) as folder:
            with open(f"{folder}/a.txt", "w") as f:
                f.write("half")
            raise RuntimeError("stopped mid-way")
    # A failed replacement leaves the earlier folder, and nothing else, behind.
    assert (output / "a.txt").read_text() == "first"
    assert [p.name for p in tmp_path.iterdir()] == ["model"]
    with replaced_folder(str(output)) as folder:
        with open(f"{folder}/b.txt", "w") as f:
            f.write("second")
    assert [p.name for p in output.iterdir()] == ["b.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["model"]
    assert oct(output.stat().st_mode & 0o777) != "0o700"  # the umask's modes, not mkdtemp's
