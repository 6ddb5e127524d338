"""Reading and writing checkpoints in the original TF1 name-based format.

Reading is strict, unlike the original (which skipped what it did not find): every variable the
model needs must be in the checkpoint with the same shape, or nothing is loaded and the error lists
every offending name with both shapes. Checkpoint variables the model does not use are named in a warning; optimizer state
(`*/adam_m`, `*/adam_v`, `global_step`) is skipped silently. Writing can add the optimizer's
moments under the original's slot names (`<variable>/adam_m`, `<variable>/adam_v`).
"""
from __future__ import annotations

import contextlib
import logging
import os
from typing import Any, Iterator, Mapping

import keras
import numpy as np
import tensorflow as tf

from modeling.checkpoints.errors import CheckpointMismatchError, CorruptCheckpointError
from modeling.checkpoints.names import is_optimizer_state, tf1_name, tf1_name_map
from utils.output_files import write_text_atomically

WORD_EMBEDDINGS = "bert/embeddings/word_embeddings"


# What TensorFlow raises on a truncated or corrupted .index or .data file: a short read surfaces
# as IndexError from the checkpoint reader, a checksum mismatch or a bad block as an OpError.
_READ_ERRORS = (tf.errors.OpError, IndexError)


@contextlib.contextmanager
def readable_checkpoint(prefix: str) -> Iterator[None]:
    """Turns TensorFlow's errors on unreadable checkpoint files into a CorruptCheckpointError
    that names the checkpoint and the likely cause."""
    try:
        yield
    except _READ_ERRORS as error:
        cause = getattr(error, "message", None) or str(error) or type(error).__name__
        raise CorruptCheckpointError(
            f"checkpoint {prefix} cannot be read: {cause.strip()}. Its .index or .data file is "
            "truncated or corrupt (an interrupted copy or download?); nothing was loaded") from None


def resolve_checkpoint_prefix(path: str) -> str:
    """Accepts a checkpoint prefix (`.../bert_model.ckpt`) or a folder holding one."""
    if tf.io.gfile.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if latest:
            return latest
        for name in ("bert_model.ckpt", "model.ckpt"):
            if tf.io.gfile.exists(os.path.join(path, name + ".index")):
                return os.path.join(path, name)
        raise FileNotFoundError(f"no checkpoint (*.index) found in the folder {path}")
    if path.endswith(".index") or ".data-" in path:
        path = path.split(".index")[0].split(".data-")[0]
    if not tf.io.gfile.exists(path + ".index"):
        raise FileNotFoundError(f"checkpoint {path} not found ({path}.index does not exist)")
    return path


def open_checkpoint(prefix: str) -> tf.train.CheckpointReader:
    """A reader of the checkpoint at `prefix` (resolved); CorruptCheckpointError if unreadable."""
    with readable_checkpoint(prefix):
        return tf.train.load_checkpoint(prefix)


def tf1_values(reader: tf.train.CheckpointReader, prefix: str) -> dict[str, np.ndarray]:
    """All variables of an open TF1 checkpoint except optimizer state, as numpy arrays."""
    with readable_checkpoint(prefix):
        return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
                if not is_optimizer_state(name)}


def read_tf1_checkpoint(path: str) -> dict[str, np.ndarray]:
    """All variables of a TF1 checkpoint except optimizer state, as numpy arrays."""
    prefix = resolve_checkpoint_prefix(path)
    return tf1_values(open_checkpoint(prefix), prefix)


def load_tf1_checkpoint(model: keras.Model, path: str,
                        reader: tf.train.CheckpointReader | None = None) -> list[str]:
    """Assigns a TF1 checkpoint's values to a built model, all or nothing.

    Args:
        model: a built encoder, pretrainer or task model.
        path: checkpoint prefix or folder; with `reader`, the resolved prefix it was opened at.
        reader: the checkpoint, already open; opened from `path` when None.

    Returns:
        The checkpoint names that the model did not use (also logged as a warning).

    Raises:
        CheckpointMismatchError: a needed variable is missing or has another shape; the vocabulary
            size of the config and of the checkpoint disagree.
        CorruptCheckpointError: the checkpoint's files cannot be read.
    """
    values = read_tf1_checkpoint(path) if reader is None else tf1_values(reader, path)
    return assign_tf1_values(model, values, f"checkpoint {path}")


def assign_tf1_values(model: keras.Model, values: dict[str, np.ndarray], source: str
                      ) -> list[str]:
    """Assigns arrays named as in the original checkpoints to every variable of a model.

    Every name and shape is checked before anything is assigned. Returns the unused names.
    """
    mapping = tf1_name_map(model)
    _check_vocab_size(mapping, values, source)
    problems = []
    for name, variable in sorted(mapping.items()):
        if name not in values:
            problems.append(f"  {name}: missing from the checkpoint (model shape "
                            f"{tuple(variable.shape)})")
        elif tuple(values[name].shape) != tuple(variable.shape):
            problems.append(f"  {name}: checkpoint shape {tuple(values[name].shape)}, model shape "
                            f"{tuple(variable.shape)}")
    if problems:
        raise CheckpointMismatchError(
            f"{source} does not fit the model ({len(problems)} variables):\n"
            + "\n".join(problems))
    for name, variable in mapping.items():
        variable.assign(values[name].astype(variable.dtype))
    unused = sorted(set(values) - set(mapping))
    if unused:
        logging.warning("%s: %d variables not used by the model: %s", source, len(unused),
                        ", ".join(unused))
    return unused


def _check_vocab_size(mapping, values, source):
    if WORD_EMBEDDINGS in mapping and WORD_EMBEDDINGS in values:
        model_rows = mapping[WORD_EMBEDDINGS].shape[0]
        checkpoint_rows = values[WORD_EMBEDDINGS].shape[0]
        if model_rows != checkpoint_rows:
            raise CheckpointMismatchError(
                f"vocab_size mismatch: bert_config.json says vocab_size={model_rows} but "
                f"{source} has {checkpoint_rows} rows in {WORD_EMBEDDINGS}")


def save_tf1_checkpoint(model: keras.Model, prefix: str, global_step: int | None = None,
                        moments: Mapping[str, tuple[Any, Any]] | None = None,
                        extra: dict[str, np.ndarray] | None = None,
                        update_state_file: bool = True) -> str:
    """Writes the model in the original format (names, shapes and dtypes of the original code).

    The data file is written under a temporary prefix and renamed into place before the index, so an
    interrupted write never leaves a checkpoint that looks complete. Unless `update_state_file` is
    False (a training folder whose `checkpoint` file lists the resumable checkpoints), a `checkpoint`
    state file names it, so that `tf.train.latest_checkpoint(folder)` finds it.

    Args:
        model: a built model.
        prefix: output prefix, e.g. `out/bert_model.ckpt`.
        global_step: written as the int64 `global_step` variable when given.
        moments: the optimizer's Adam moments, {Keras variable path: (m, v)} (arrays or
            variables, e.g. `AdamWeightDecay.moment_slots()`), written as the original's slots
            `<original name>/adam_m` and `<original name>/adam_v`.
        extra: more named arrays to write, under their names as given.
        update_state_file: write the `checkpoint` state file naming this checkpoint.

    Returns:
        The prefix written.
    """
    tensors = {name: variable.numpy() for name, variable in tf1_name_map(model).items()}
    tensors.update(moment_slots(moments or {}))
    tensors.update(extra or {})
    if global_step is not None:
        tensors["global_step"] = np.asarray(global_step, np.int64)
    folder = os.path.dirname(os.path.abspath(prefix))
    tf.io.gfile.makedirs(folder)
    temp_prefix = f"{prefix}.tmp-{os.getpid()}"
    names = sorted(tensors)
    tf.raw_ops.SaveV2(prefix=temp_prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.convert_to_tensor(tensors[n]) for n in names])
    data_files = tf.io.gfile.glob(temp_prefix + ".data-*")
    for data_file in data_files:
        # The shard's suffix, not a slice of the temporary prefix: glob may spell a relative
        # prefix another way ("./model.ckpt...").
        tf.io.gfile.rename(data_file, prefix + ".data-" + data_file.rsplit(".data-", 1)[1],
                           overwrite=True)
    tf.io.gfile.rename(temp_prefix + ".index", prefix + ".index", overwrite=True)
    if update_state_file:
        _write_state_file(folder, os.path.basename(prefix))
    return prefix


def moment_slots(moments: Mapping[str, tuple[Any, Any]]) -> dict[str, np.ndarray]:
    """{`<original name>/adam_m` and `/adam_v`: array} of {Keras variable path: (m, v)}."""
    slots = {}
    for path, (m, v) in moments.items():
        name = tf1_name(path)
        slots[f"{name}/adam_m"] = _as_array(m)
        slots[f"{name}/adam_v"] = _as_array(v)
    return slots


def _as_array(value: Any) -> np.ndarray:
    return value.numpy() if hasattr(value, "numpy") else np.asarray(value)


def _write_state_file(folder: str, basename: str) -> None:
    state = f'model_checkpoint_path: "{basename}"\nall_model_checkpoint_paths: "{basename}"\n'
    write_text_atomically(os.path.join(folder, "checkpoint"), state)
