"""`train_log.jsonl`, the training loop's record of every step, kept across resumption."""
import json
import os
import sys
import time

from utils.output_files import write_text_atomically

STEP_LOG_FILE = "train_log.jsonl"


class StepLog:
    """`train_log.jsonl`: one JSON object per training step (step, losses and metrics,
    learning_rate as `Trainer._learning_rate`, examples_per_second of that step, and wall_time,
    the seconds since the epoch when the step ended, as TensorBoard's), so that runs compare
    curve against curve, by step or by time.

    A resumed run first drops the lines after its checkpoint's step, which it is about to redo.
    """

    def __init__(self, path: str, step: int):
        self.path = path
        kept = []
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                kept = [line for line in f if _logged_step(line) <= step]
        write_text_atomically(path, "".join(kept))

    def write(self, step: int, logs: dict, learning_rate: float,
              examples_per_second: float) -> None:
        record = {"step": step, **logs, "learning_rate": learning_rate,
                  "examples_per_second": round(examples_per_second, 2),
                  "wall_time": round(time.time(), 3)}
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")


def _logged_step(line: str) -> int:
    """The step of a `train_log.jsonl` line; a cut-off last line counts as not written."""
    try:
        return int(json.loads(line)["step"])
    except (ValueError, KeyError):
        return sys.maxsize
