"""A benchmark worker: one process per contender, driven over a pipe by `run_benchmarks.py`.

Separate processes keep each library's thread pools, global settings (Keras dtype policy) and
memory apart, so that alternating the contenders call by call measures each one alone.

Messages (tuples) and replies (dicts):
  ("build", case dict)  -> builds the model and step, runs the first call (tracing, compilation)
                           and one warm-up call: {"first_s", "warmup_s", ...}
  ("run",)              -> one timed call: {"wall_s", "cpu_s"}
  ("free",)             -> drops the model: {}
  ("peak", dtype, m, k, n) -> one timed [m, k] x [k, n] matmul: {"wall_s", "cpu_s"}
  ("stop",)             -> exits.
Errors come back as {"error": traceback text}.
"""
from __future__ import annotations

import gc
import os
import shutil
import tempfile
import time
import traceback


def _timed(fn) -> dict:
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    return {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu}


class _Matmul:
    """One [m, k] x [k, n] product in the worker's framework, inputs made once."""

    def __init__(self, framework: str, dtype: str, m: int, k: int, n: int):
        if framework == "torch":
            import torch
            torch_dtype = getattr(torch, dtype)
            a, b = torch.randn(m, k).to(torch_dtype), torch.randn(k, n).to(torch_dtype)
            self.call = lambda: torch.matmul(a, b)
        else:
            import tensorflow as tf
            a = tf.cast(tf.random.normal([m, k]), dtype)
            b = tf.cast(tf.random.normal([k, n]), dtype)
            product = tf.function(tf.matmul)
            self.call = lambda: product(a, b)
        self.call()


def worker_main(connection, contender_key: str) -> None:
    """Serves the driver's messages until ("stop",)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    from bench.cases import Case
    from bench.contenders import CONTENDERS
    contender = CONTENDERS[contender_key]()
    run, workdir, matmuls = None, None, {}
    while True:
        message = connection.recv()
        try:
            if message[0] == "stop":
                break
            if message[0] == "build":
                workdir = tempfile.mkdtemp(prefix="bert_bench_")
                run = contender.build(Case.from_dict(message[1]), workdir)
                reply = {"first_s": _timed(run)["wall_s"], "warmup_s": _timed(run)["wall_s"]}
                if hasattr(contender, "input_pipeline_rate") and message[1]["mode"] == "train":
                    reply["input_batches_per_s"] = contender.input_pipeline_rate()
            elif message[0] == "run":
                reply = _timed(run)
            elif message[0] == "free":
                run = None
                _free_framework_memory(contender.framework)
                shutil.rmtree(workdir, ignore_errors=True)
                reply = {}
            elif message[0] == "peak":
                key = message[1:]
                if key not in matmuls:
                    matmuls[key] = _Matmul(contender.framework, *key)
                reply = _timed(matmuls[key].call)
            else:
                raise ValueError(f"unknown message {message!r}")
        except Exception:  # pylint: disable=broad-except
            reply = {"error": traceback.format_exc()}
        connection.send(reply)


def _free_framework_memory(framework: str) -> None:
    if framework == "tensorflow":
        import keras
        keras.backend.clear_session()
    gc.collect()
