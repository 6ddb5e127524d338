"""A teacher's outputs on a distillation set, computed once and kept as TFRecords.

The rows are cut into shards of `shard_rows`; each shard is one TFRecord file of a
`tf.train.Example` a row, each output a float list, written under a temporary name and renamed
into place when whole (`AtomicRecordFile`). A run killed while the teacher labels its rows leaves
whole shards only: a rerun keeps them and computes the others, and a rerun after that computes
nothing. `manifest.json` names what the shards are the outputs of (the teacher's weights, the
rows' inputs, the outputs and their shapes): a folder holding another teacher's or other rows'
outputs is refused, never mixed.
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Callable, Iterable, Mapping

import numpy as np
import tensorflow as tf

from data.pretraining.tfrecord_io import (AtomicRecordFile, frame_records,
                                          remove_stale_temporary_files)
from utils.output_files import write_text_atomically
from utils.progress import Progress

MANIFEST_FILE = "manifest.json"
# Rows a shard holds: what a run killed while labelling loses at most.
SHARD_ROWS = 2048


def fingerprint(named_arrays: Iterable[tuple[str, np.ndarray]]) -> str:
    """The SHA-256 of named arrays: their names, dtypes, shapes and bytes, in order."""
    digest = hashlib.sha256()
    for name, array in named_arrays:
        array = np.ascontiguousarray(array)
        digest.update(f"{name}:{array.dtype.str}:{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


class TeacherOutputs:
    """The shards of one teacher's outputs on `num_rows` rows, in `folder`.

    Args:
        folder: where the shards and the manifest are (made if absent).
        shapes: each output's shape for one row, e.g. {"logits": (2,)}.
        num_rows: the rows labelled.
        source: what the outputs are of (fingerprints of the teacher and of the rows' inputs),
            recorded in the manifest and checked on every later run.
        shard_rows: rows a shard.
    """

    def __init__(self, folder: str, shapes: Mapping[str, tuple[int, ...]], num_rows: int,
                 source: Mapping[str, str], shard_rows: int = SHARD_ROWS):
        if shard_rows < 1:
            raise ValueError(f"shard_rows={shard_rows} must be at least 1")
        self.folder = folder
        self.shapes = {name: tuple(int(n) for n in shape) for name, shape in shapes.items()}
        self.num_rows = num_rows
        self.shard_rows = shard_rows
        self.manifest = {"num_rows": num_rows, "shard_rows": shard_rows,
                         "shapes": {name: list(shape) for name, shape in self.shapes.items()},
                         "source": dict(source)}

    @property
    def num_shards(self) -> int:
        return -(-self.num_rows // self.shard_rows)

    def shard_path(self, index: int) -> str:
        return os.path.join(self.folder, f"outputs-{index:05d}-of-{self.num_shards:05d}.tfrecord")

    def missing(self) -> list[int]:
        """The shards not written yet."""
        return [index for index in range(self.num_shards)
                if not os.path.isfile(self.shard_path(index))]

    def check_manifest(self) -> None:
        """Writes the manifest into a new folder, or checks the folder's against this one.

        Raises:
            ValueError: the folder holds the outputs of another teacher, other rows or shapes.
        """
        path = os.path.join(self.folder, MANIFEST_FILE)
        if not os.path.isfile(path):
            os.makedirs(self.folder, exist_ok=True)
            write_text_atomically(path, json.dumps(self.manifest, indent=2, sort_keys=True) + "\n")
            return
        with open(path, encoding="utf-8") as f:
            found = json.load(f)
        if found != self.manifest:
            differ = sorted(key for key in {**found, **self.manifest}
                            if found.get(key) != self.manifest.get(key))
            raise ValueError(f"{self.folder} holds the outputs of another teacher or of other "
                             f"rows ({MANIFEST_FILE} differs in {', '.join(differ)}): give a "
                             "new --output_dir, or remove that folder to label the rows again")

    def fill(self, compute: Callable[[int, int], Mapping[str, np.ndarray]]) -> int:
        """Computes and writes every missing shard; returns how many rows were computed.

        Args:
            compute: `compute(start, end)`, the outputs of rows start..end-1, float32
                [end - start, *shape] each.
        """
        self.check_manifest()
        missing = self.missing()
        rows = sum(min(self.shard_rows, self.num_rows - index * self.shard_rows)
                   for index in missing)
        progress = Progress("rows labelled by the teacher", rows)
        for index in missing:
            start = index * self.shard_rows
            end = min(start + self.shard_rows, self.num_rows)
            self._write(index, compute(start, end), end - start)
            progress.update(end - start)
        if missing:
            progress.done()
        return rows

    def _write(self, index: int, outputs: Mapping[str, np.ndarray], count: int) -> None:
        for name, shape in self.shapes.items():
            if outputs[name].shape != (count, *shape):
                raise ValueError(f"{name}: outputs of shape {outputs[name].shape}, expected "
                                 f"{(count, *shape)}")
        records = [tf.train.Example(features=tf.train.Features(feature={
            name: tf.train.Feature(float_list=tf.train.FloatList(
                value=np.asarray(outputs[name][row], np.float32).reshape(-1)))
            for name in self.shapes})).SerializeToString() for row in range(count)]
        path = self.shard_path(index)
        remove_stale_temporary_files(path)
        framed, _ = frame_records(records)
        with AtomicRecordFile(path) as out:
            out.write(framed)

    def read(self) -> dict[str, np.ndarray]:
        """Every output of every row, float32 [num_rows, *shape], from the shards."""
        spec = {name: tf.io.FixedLenFeature([int(np.prod(shape))], tf.float32)
                for name, shape in self.shapes.items()}
        parts: dict[str, list[np.ndarray]] = {name: [] for name in self.shapes}
        for index in range(self.num_shards):
            dataset = tf.data.TFRecordDataset(self.shard_path(index)).batch(self.shard_rows)
            for batch in dataset:
                for name, values in tf.io.parse_example(batch, spec).items():
                    parts[name].append(values.numpy())
        return {name: np.concatenate(parts[name]).reshape(self.num_rows, *shape)
                for name, shape in self.shapes.items()}
