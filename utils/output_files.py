"""Writing output files and folders atomically, and the original's `eval_results.txt` format.

Every file is written to a temporary file in the same folder and then renamed into place (every
folder likewise), so a reader never sees half an output and an interrupted run leaves nothing
that looks complete. The one atomic writer of the project: `AtomicFile` (and
`write_text_atomically` on it, `written_together` for files that go together),
`atomic_output_folder` for folders.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from typing import Iterator, Mapping
import uuid

import numpy as np


class AtomicFile:
    """A file written under a temporary name in its folder and renamed into place by `commit`.

    Use as a context manager (committed when the block succeeds, aborted otherwise) or call
    `commit` / `abort` yourself. A failed write (full disk, file-size limit) raises an OSError
    that names the output.
    """

    def __init__(self, path: str | os.PathLike, binary: bool = False,
                 temp_name: str | None = None):
        """
        Args:
            path: the output file.
            binary: open for bytes rather than UTF-8 text.
            temp_name: the temporary file's name in the same folder; default
                `<name>.<pid>.<random>.tmp`.
        """
        self.path = os.fspath(path)
        folder, name = os.path.split(os.path.abspath(self.path))
        self.temp_path = os.path.join(
            folder, temp_name or f"{name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
        # Mode "x": a fresh name, with the usual (umask) permissions, unlike mkstemp's private one.
        with self._naming_failures():
            self.file = open(self.temp_path, "xb") if binary else \
                open(self.temp_path, "x", encoding="utf-8", newline="\n")

    def write(self, data: str | bytes) -> None:
        with self._naming_failures():
            self.file.write(data)

    def commit(self) -> None:
        """Flushes the data to disk and gives the file its final name."""
        self.finish()
        self.rename()

    def finish(self) -> None:
        """Flushes the data to disk and closes the temporary file."""
        with self._naming_failures():
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()

    def rename(self) -> None:
        """Gives the finished temporary file its final name."""
        with self._naming_failures():
            os.replace(self.temp_path, self.path)

    def abort(self) -> None:
        """Closes and deletes the temporary file; the output path is left untouched."""
        try:
            self.file.close()  # flushes what is buffered: fails again on a full disk
        except OSError:
            pass
        finally:
            if os.path.exists(self.temp_path):
                os.remove(self.temp_path)

    def __enter__(self) -> AtomicFile:
        return self

    def __exit__(self, error_type, error, traceback) -> None:
        if error_type is None:
            self.commit()
        else:
            self.abort()

    @contextlib.contextmanager
    def _naming_failures(self) -> Iterator[None]:
        try:
            yield
        except OSError as error:
            if error.filename:
                raise
            raise OSError(error.errno, f"writing {self.path} failed: {error.strerror}") from None


_GROUPS = threading.local()


def write_text_atomically(path: str | os.PathLike, text: str) -> None:
    """Writes `text` (UTF-8) to `path` through a temporary file renamed into place.

    Inside `written_together`, the rename waits for the end of the block.
    """
    group = getattr(_GROUPS, "files", None)
    f = AtomicFile(path)
    try:
        f.write(text)
        if group is None:
            f.commit()
        else:
            f.finish()
            group.append(f)
    except BaseException:
        f.abort()
        raise


@contextlib.contextmanager
def written_together() -> Iterator[None]:
    """Gives files that belong together (predictions and their scores) their final names together.

    `write_text_atomically` inside the block writes each file in full under its temporary name;
    the renames follow once the block succeeds. On an error none is renamed, so a run stopped
    midway never leaves a new file beside an old one.
    """
    if getattr(_GROUPS, "files", None) is not None:
        yield  # an enclosing group renames them
        return
    _GROUPS.files = files = []
    try:
        yield
        _GROUPS.files = None
        while files:
            files[0].rename()
            files.pop(0)
    finally:
        _GROUPS.files = None
        for f in files:  # the block failed, or a rename
            f.abort()


def check_output_folder(output: str) -> None:
    """Raises FileExistsError unless `output` is absent or an empty folder."""
    if os.path.exists(output) and not (os.path.isdir(output) and not os.listdir(output)):
        raise FileExistsError(f"output {output} exists and is not an empty folder")


@contextlib.contextmanager
def atomic_output_folder(output: str) -> Iterator[str]:
    """Yields a temporary folder beside `output`, renamed to `output` when the block succeeds.

    `output` must be absent or an empty folder. On any error the temporary folder is removed and
    `output` is left as it was.
    """
    check_output_folder(output)
    with _temporary_folder(output) as temp:
        yield temp
        _set_default_permissions(temp)
        if os.path.isdir(output):
            os.rmdir(output)
        os.rename(temp, output)


@contextlib.contextmanager
def replaced_folder(output: str) -> Iterator[str]:
    """Yields a temporary folder beside `output` that replaces `output` (a folder, or absent)
    when the block succeeds: the old folder is renamed aside, the new one into place, then the
    old one removed. On any error the temporary folder is removed and `output` is left as it was.
    """
    with _temporary_folder(output) as temp:
        yield temp
        _set_default_permissions(temp)
        old = None
        if os.path.isdir(output):
            old = tempfile.mkdtemp(dir=os.path.dirname(os.path.abspath(output)),
                                   prefix=f".{os.path.basename(output)}.old-")
            os.rmdir(old)
            os.rename(output, old)
        os.rename(temp, output)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def _temporary_folder(output: str) -> Iterator[str]:
    """A temporary folder beside `output`, removed when the block fails (the caller renames it
    into place when it succeeds)."""
    parent = os.path.dirname(os.path.abspath(output))
    os.makedirs(parent, exist_ok=True)
    temp = tempfile.mkdtemp(dir=parent, prefix=f".{os.path.basename(output)}.tmp-")
    try:
        yield temp
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise


def _set_default_permissions(folder: str) -> None:
    """Gives a temporary folder and its files the modes the umask gives new ones."""
    umask = os.umask(0o022)
    os.umask(umask)
    for root, _, files in os.walk(folder):
        os.chmod(root, 0o777 & ~umask)
        for name in files:
            os.chmod(os.path.join(root, name), 0o666 & ~umask)


def format_number(value: float | int | np.number) -> str:
    """Formats as the original's `str()` of TF's float32 / int64 outputs (`0.8431373`, `343`)."""
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    return str(np.float32(value))


def write_eval_results(path: str | os.PathLike, results: Mapping[str, float | int]) -> None:
    """Writes `eval_results.txt`: one `key = value` line per result, keys sorted, as the original.

    Args:
        path: Output file.
        results: metric name -> value (`global_step` an int).
    """
    lines = [f"{key} = {format_number(results[key])}\n" for key in sorted(results)]
    write_text_atomically(path, "".join(lines))
