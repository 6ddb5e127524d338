"""Training checkpoints for exact resumption: model, optimizer, step and input position together.

Checkpoints are TF2 object-based (`ckpt-N` in the output folder) with the model under the key `model`,
so they are also readable as this project's model checkpoints. On restart the newest readable one is
restored; a corrupt or partial newest checkpoint is reported and the previous one used.

The one resume rule of every script (`resumes`): a run whose output folder holds a training
checkpoint continues from it (model, optimizer, step, input position) and does not load
`--init_checkpoint`; a run whose folder holds none starts from `--init_checkpoint`.
"""
from __future__ import annotations

import glob
import os
import shutil

from absl import logging
import tensorflow as tf


class CheckpointWriteError(OSError):
    """A training checkpoint could not be written; nothing half-written is left."""


class UnreadableCheckpointsError(ValueError):
    """The output folder holds training checkpoints and none of them can be restored."""


class TrainingCheckpoints:
    """Saves and restores `{model, optimizer, iterator, ...}` in `directory`, keeping `max_to_keep`.

    Args:
        directory: the run's output folder.
        max_to_keep: how many recent checkpoints to keep.
        **objects: what to save: `model`, `optimizer`, and the input `iterator` when it supports
            checkpointing.
    """

    def __init__(self, directory: str, max_to_keep: int = 3, **objects):
        self.checkpoint = tf.train.Checkpoint(**objects)
        self.manager = tf.train.CheckpointManager(self.checkpoint, directory,
                                                  max_to_keep=max_to_keep)
        self.directory = directory

    def save(self, step: int) -> str:
        """Writes `ckpt-<step>`; the state file is updated only after the files are complete.

        Raises:
            CheckpointWriteError: the files could not be written (a full disk, a file-size
                limit, a read-only folder); what was half-written is removed, and the previous
                checkpoints stay as they were.
        """
        try:
            return self.manager.save(checkpoint_number=step)
        except (tf.errors.OpError, OSError) as error:
            prefix = os.path.join(self.directory, f"ckpt-{step}")
            for partial in glob.glob(f"{prefix}_temp*") + glob.glob(f"{prefix}.*"):
                if os.path.isdir(partial):
                    shutil.rmtree(partial, ignore_errors=True)
                else:
                    os.remove(partial)
            cause = (getattr(error, "message", None) or str(error)).split("} ")[-1]
            raise CheckpointWriteError(
                f"writing checkpoint {prefix} failed: {cause.strip()}; the previous checkpoint "
                f"({self.manager.latest_checkpoint or 'none'}) is intact") from None

    def restore_latest(self) -> str | None:
        """Restores the newest readable checkpoint; returns its path, or None when there is none.

        Raises:
            UnreadableCheckpointsError: there are checkpoints and none of them is readable (the
                run must not start again from scratch: `--init_checkpoint` was not loaded).
        """
        candidates = sorted(self._candidates(), key=_checkpoint_number, reverse=True)
        for path in candidates:
            try:
                self.checkpoint.restore(path).assert_existing_objects_matched()
                logging.info("resumed from %s", path)
                return path
            except Exception as error:  # pylint: disable=broad-except
                # A truncated or partial file fails in many ways (OpError, IndexError, ...).
                logging.warning("checkpoint %s is unreadable (%s); trying the previous one",
                                path, str(error).splitlines()[0][:200])
        if candidates:
            raise UnreadableCheckpointsError(
                f"no training checkpoint in {self.directory} is readable ({', '.join(candidates)}); "
                "move them away to start again from --init_checkpoint")
        return None

    def _candidates(self) -> list[str]:
        return sorted(set(self.manager.checkpoints) | set(training_checkpoints(self.directory)))


def training_checkpoints(directory: str) -> list[str]:
    """The training checkpoints (`ckpt-N`) in `directory`, readable or not, newest first."""
    found = [p[:-len(".index")] for p in glob.glob(os.path.join(directory, "ckpt-*.index"))]
    return sorted(found, key=_checkpoint_number, reverse=True)


def resumes(output_dir: str) -> bool:
    """Whether a run in `output_dir` resumes from a training checkpoint there (the module's rule);
    when it does, `--init_checkpoint` is not loaded."""
    return bool(training_checkpoints(output_dir))


def _checkpoint_number(path: str) -> int:
    try:
        return int(path.rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return -1
