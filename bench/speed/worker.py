"""A benchmark worker: one process per contender, driven over a pipe by `run_benchmarks.py`.

Separate processes keep each library's thread pools, global settings (Keras dtype policy) and
memory apart, so that alternating the contenders call by call measures each one alone.

Messages (tuples) and replies (dicts):
  ("build", case dict)  -> builds the model and step, runs the first call (tracing, compilation)
                           and one warm-up call: {"first_s", "warmup_s", ...}
  ("run",)              -> one timed call: {"wall_s", "cpu_s"}
  ("memory",)           -> the process's peak resident memory since its last "build" (the
                           build, the first calls and the timed ones): {"peak_rss_mb"}
  ("free",)             -> drops the model: {}
  ("peak", dtype, m, k, n) -> one timed [m, k] x [k, n] matmul: {"wall_s", "cpu_s"}
  ("products", dtype, m, k, n, length, jit_compile)
                        -> one timed call of `length` dependent products (see `_Matmul`)
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
    """`length` dependent products in one call of the worker's framework, inputs made once:
    x <- x W_i from x [m, k], W_i alternately [k, n] and [n, k] (one product: [m, k] x [k, n]).

    A chain of small products, in one call so that the call's own cost is spread over them,
    times the matrix work of a batch-1 forward pass; TensorFlow's with XLA (`jit_compile`) or as
    a graph.
    """

    def __init__(self, framework: str, dtype: str, m: int, k: int, n: int, length: int = 1,
                 jit_compile: bool = False):
        shapes = [(k, n) if i % 2 == 0 else (n, k) for i in range(length)]
        if framework == "torch":
            import torch
            torch_dtype = getattr(torch, dtype)
            x = torch.randn(m, k).to(torch_dtype)
            weights = [(torch.randn(*shape) / shape[0] ** 0.5).to(torch_dtype) for shape in shapes]
            self.call = lambda: _chain(torch.matmul, x, weights)
        else:
            import tensorflow as tf
            x = tf.cast(tf.random.normal([m, k]), dtype)
            weights = [tf.cast(tf.random.normal(shape) / shape[0] ** 0.5, dtype)
                       for shape in shapes]
            products = tf.function(lambda x, weights: _chain(tf.matmul, x, weights),
                                   jit_compile=jit_compile)
            self.call = lambda: products(x, weights)
        self.call()


def _chain(matmul, x, weights):
    for w in weights:
        x = matmul(x, w)
    return x


def worker_main(connection, contender_key: str, scratch_dir: str) -> None:
    """Serves the driver's messages until ("stop",); a case's files go under `scratch_dir`."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    from bench.speed.cases import Case
    from bench.speed.contenders import CONTENDERS
    contender = CONTENDERS[contender_key]()
    run, workdir, matmuls = None, None, {}
    while True:
        message = connection.recv()
        try:
            if message[0] == "stop":
                break
            if message[0] == "build":
                _reset_peak_rss()
                workdir = tempfile.mkdtemp(prefix="case_", dir=scratch_dir)
                run = contender.build(Case.from_dict(message[1]), workdir)
                reply = {"first_s": _timed(run)["wall_s"], "warmup_s": _timed(run)["wall_s"]}
                if hasattr(contender, "input_pipeline_rate") and message[1]["mode"] == "train":
                    reply["input_batches_per_s"] = contender.input_pipeline_rate()
            elif message[0] == "run":
                reply = _timed(run)
            elif message[0] == "memory":
                reply = {"peak_rss_mb": _peak_rss_mb()}
            elif message[0] == "free":
                run = None
                _free_framework_memory(contender.framework)
                shutil.rmtree(workdir, ignore_errors=True)
                reply = {}
            elif message[0] in ("peak", "products"):
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


def _reset_peak_rss() -> None:
    """Sets the process's peak resident memory (VmHWM) to its current one (Linux: clear_refs 5)."""
    with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
        f.write("5")


def _peak_rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise OSError("no VmHWM line in /proc/self/status")
