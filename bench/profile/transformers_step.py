"""transformers' fine-tuning step in its own process, the peer of `bench/profile/training_step.py`.

The step is `bench/fine_tuning/transformers_run.py`'s, as transformers' example loop takes it:
`BertForSequenceClassification` (PyTorch, CPU, its default attention), loss, backward, gradient
clipping at 1.0, PyTorch's AdamW with weight decay 0.01 off for biases and LayerNorm, the linear
schedule. Each batch arrives padded to its longest sequence, as `DataCollatorWithPadding` pads it
(int64 tensors). Its own process keeps PyTorch's threads apart from TensorFlow's.

Messages over the pipe: ("build", sizes, num_labels) -> {}; ("step", batch of numpy arrays with
the project's keys) -> {"wall_s", "cpu_s"}; ("stop",). Errors come back as {"error": text}.
"""
from __future__ import annotations

import time
import traceback

from bench.support import SpawnedProcess


def _serve(connection) -> None:
    import torch
    import transformers
    from bench.fine_tuning.transformers_run import adamw_and_schedule, torch_inputs, train_step
    model = optimizer = scheduler = None
    while True:
        message = connection.recv()
        try:
            if message[0] == "stop":
                break
            if message[0] == "build":
                sizes, num_labels = message[1], message[2]
                config = transformers.BertConfig(
                    vocab_size=30522, hidden_size=sizes["hidden_size"],
                    num_hidden_layers=sizes["num_hidden_layers"],
                    num_attention_heads=sizes["num_attention_heads"],
                    intermediate_size=sizes["intermediate_size"], hidden_act="gelu",
                    layer_norm_eps=1e-12, num_labels=num_labels)
                torch.manual_seed(0)
                model = transformers.BertForSequenceClassification(config)
                model.train()
                optimizer, scheduler = adamw_and_schedule(model, 5e-5, 0.1, 1000)
                reply = {}
            elif message[0] == "step":
                batch = torch_inputs(message[1])
                cpu, start = time.process_time(), time.perf_counter()
                train_step(model, batch, optimizer, scheduler)
                reply = {"wall_s": time.perf_counter() - start,
                         "cpu_s": time.process_time() - cpu}
            else:
                raise ValueError(f"unknown message {message!r}")
        except Exception:  # pylint: disable=broad-except
            reply = {"error": traceback.format_exc()}
        connection.send(reply)


class TransformersStep(SpawnedProcess):
    """The driver's end: a spawned process holding transformers' model and optimizer."""

    def __init__(self, sizes: dict, num_labels: int):
        super().__init__("transformers' step", _serve)
        self.ask("build", sizes, num_labels)

    def step(self, batch: dict) -> tuple[float, float]:
        """(wall, CPU) seconds of one training step on `batch`."""
        reply = self.ask("step", batch)
        return reply["wall_s"], reply["cpu_s"]
