"""The fine-tuning training step, profiled per op, packed against padded: where its time goes,
its wall time, its useful-token MFU, and (`--memory`) its peak resident memory.

The step is `run_classifier.py`'s: a `BertClassifier`, the original's optimizer (AdamWeightDecay
with global-norm clipping), `training.trainer.Trainer`'s step on batches of 32 of the task's
in-memory features, each cut to its longest sequence (`running.batching.ArrayExamples`), and
Grappler off, as the training loop runs float32 on CPU. The weights are drawn at random: the time
does not depend on them. A case is `model/data`: model `bert_base` (BERT-Base, tanh GELU) or
`minilm` (all-MiniLM-L6-v2's sizes, 6 layers, H=384, erf GELU); data `full` (32 x 128, every row
full: nothing for packing to remove), `mrpc` (MRPC's training set) or `sst2` (every fortieth
sentence of SST-2's re-split train, as the fine-tuning benchmark), random batches, or grouped by
length with the suffix `_by_length` (`--group_by_length`).

The packed model (`BertEncoder(packed=True)`, the default) and the padded one (`packed=False`) are
built in one process; for MiniLM, transformers' step (`bench/profile/transformers_step.py`, its own
process) is the third side. The sides' steps alternate on the same batches, round by round, with
one float32 matmul of each of the speed benchmark's peak shapes per round (the MFU's peak). Then
the two of this project each take a few steps under TensorFlow's profiler, its trace summed per op
(`bench/profile/ops.py`). MFU counts the model FLOPs of the batch's real tokens
(`bench/profile/useful_flops.py`), against the matmul rate of the same rounds from wall time, and
from CPU time (a step's CPU seconds against the matmul's: both as if they had every core, steadier
where other work shares the machine). `--memory` instead runs each case's variants in fresh
processes, alternated: the resident memory with the model and optimizer built, and the peak
(`VmHWM`, reset then) over the first steps.

    python -m bench.profile.training_step           # the PROFILE_CASES
    python -m bench.profile.training_step --memory  # minilm and bert_base on mrpc and sst2
    python -m bench.profile.training_step --cases=minilm/mrpc --rounds=10

Writes profile_results.json (each mode's part) and profile_results.md into --output_dir
(bench/results/training_step_profile/).
"""
from __future__ import annotations

import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from absl import flags
import numpy as np

from bench.profile import ops
from bench.profile.useful_flops import BERT_BASE, MINILM_L6_H384, training_flops
from bench.support import (REPO_ROOT, define_output_dir_flag, machine_description, read_json,
                           shared_data_dir, write_report)
from utils import entry_point

FLAGS = flags.FLAGS

BATCH, MAX_LENGTH = 32, 128
MODELS = {"bert_base": (BERT_BASE, "gelu", 12), "minilm": (MINILM_L6_H384, "gelu_exact", 12)}
GLUE_TRAIN = {"mrpc": "MRPC", "sst2": "SST-2/resplit_from_train"}
PROFILE_CASES = ("bert_base/full", "minilm/mrpc", "minilm/mrpc_by_length", "minilm/sst2",
                 "minilm/sst2_by_length")
MEMORY_CASES = ("minilm/mrpc", "minilm/sst2", "bert_base/mrpc", "bert_base/sst2")
VARIANTS = ("packed", "padded")  # this project's; "transformers" is the peer


def case_arrays(data: str, glue_dir: str, vocab_file: str):
    """(GLUE task, features as arrays) of a case's data."""
    from data.classifier import glue_tasks
    from data.classifier.features import convert_examples_to_features, features_to_arrays
    from data.tokenization import FullTokenizer
    data = data.removesuffix("_by_length")
    task = glue_tasks.get_task("sst2" if data == "sst2" else "mrpc")
    if data == "full":
        rng = np.random.default_rng(0)
        rows = BATCH * 64
        return task, {"input_ids": rng.integers(1000, 30522, (rows, MAX_LENGTH), dtype=np.int32),
                      "input_mask": np.ones((rows, MAX_LENGTH), np.int32),
                      "segment_ids": (np.arange(MAX_LENGTH)[None] >= MAX_LENGTH // 2).repeat(
                          rows, 0).astype(np.int32),
                      "label_ids": rng.integers(0, 2, rows, dtype=np.int32)}
    examples = glue_tasks.read_examples(task, os.path.join(glue_dir, GLUE_TRAIN[data]), "train")
    if data == "sst2":
        examples = examples[::40]
    features = convert_examples_to_features(examples, task.label_list, MAX_LENGTH,
                                            FullTokenizer(vocab_file, True))
    return task, features_to_arrays(features)


def _batching(data: str):
    from running.batching import Batching
    return Batching(group_by_length=data.endswith("_by_length"))


def build_step(model_name: str, task, arrays: dict, packed: bool, output_dir: str,
               batching=None):
    """(step, iterator, model, optimizer): `Trainer`'s step on random batches of `arrays`."""
    import keras
    import tensorflow as tf
    from modeling.config import BertConfig
    from modeling.models.task_models import BertClassifier
    from tasks import classifier
    from running.batching import ArrayExamples, Batching
    from training.optimizer import create_optimizer
    from training.trainer import Trainer, TrainingConfig
    size, hidden_act, heads = MODELS[model_name]
    config = BertConfig(vocab_size=30522, hidden_size=size.hidden_size,
                        num_hidden_layers=size.num_hidden_layers, num_attention_heads=heads,
                        intermediate_size=size.intermediate_size, hidden_act=hidden_act)
    keras.utils.set_random_seed(0)
    model = BertClassifier(config, task.num_labels, packed=packed)
    optimizer = create_optimizer(5e-5, 1000, 100)
    optimizer.build(model.trainable_variables)
    loss_fn = classifier.fine_tuning_task(
        config, classifier.Settings(output_dir, 128, True, task=task),
        classifier.Splits(task, {})).loss_fn
    trainer = Trainer(tf.distribute.get_strategy(), model, optimizer, loss_fn,
                      TrainingConfig(num_train_steps=1000, output_dir=output_dir,
                                     jit_compile=None))
    dataset_fn = ArrayExamples(arrays, batching=batching or Batching()).training_dataset_fn(
        BATCH, seed=1)
    return trainer.make_step(), iter(dataset_fn(tf.distribute.InputContext())), model, optimizer


def host_batches(arrays: dict, count: int, batching=None) -> list[dict[str, np.ndarray]]:
    """The first `count` training batches `build_step` feeds, as numpy arrays."""
    import tensorflow as tf
    from running.batching import ArrayExamples, Batching
    dataset_fn = ArrayExamples(arrays, batching=batching or Batching()).training_dataset_fn(
        BATCH, seed=1)
    batches = iter(dataset_fn(tf.distribute.InputContext()))
    return [{k: v.numpy() for k, v in next(batches).items()} for _ in range(count)]


def _run(step, iterator) -> tuple[float, float]:
    """(wall, CPU) seconds of one step."""
    cpu, start = time.process_time(), time.perf_counter()
    float(step(iterator)["loss"])
    return time.perf_counter() - start, time.process_time() - cpu


def _matmul_rates(matmul, shape) -> tuple[float, float]:
    """GFLOP/s of one call from its wall time, and with every core to itself from its CPU time."""
    cpu, start = time.process_time(), time.perf_counter()
    matmul.call()
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    flops = 2.0 * np.prod(shape)
    return flops / wall / 1e9, flops * os.cpu_count() / cpu / 1e9


def profile_case(case: str, rounds: int, profile_steps: int, glue_dir: str, vocab_file: str
                 ) -> dict:
    """Alternated timing rounds of every side, then a profile of this project's two, on the
    same batches."""
    from bench.profile.transformers_step import TransformersStep
    from bench.speed.run_benchmarks import PEAK_SHAPES
    from bench.speed.worker import _Matmul
    from training import trainer as trainer_module
    model_name, data = case.split("/")
    task, arrays = case_arrays(data, glue_dir, vocab_file)
    work = tempfile.mkdtemp(prefix="profile_step_")
    built = {v: build_step(model_name, task, arrays, v == "packed", os.path.join(work, v),
                           _batching(data)) for v in VARIANTS}
    warmup = 2
    batches = host_batches(arrays, warmup + rounds + profile_steps, _batching(data))
    size, _, heads = MODELS[model_name]
    sides = {v: (lambda _, v=v: _run(*built[v][:2])) for v in VARIANTS}
    peer = None
    if model_name == "minilm":
        peer = TransformersStep({**dataclasses.asdict(size), "num_attention_heads": heads},
                                task.num_labels)
        sides["transformers"] = peer.step
    matmuls = {shape: _Matmul("tensorflow", "float32", *shape) for shape in PEAK_SHAPES}
    result = {"case": case, "rounds": rounds, "profile_steps": profile_steps,
              "load_average_start": os.getloadavg(), "variants": {}}
    times = {v: [] for v in sides}
    peak = {shape: [] for shape in PEAK_SHAPES}  # (wall, CPU-time) GFLOP/s
    order = list(sides)
    # The training loop's graph options (Grappler off for float32 on CPU), for every call.
    with trainer_module._graph_options(built["packed"][2]):  # pylint: disable=protected-access
        for v, side in sides.items():
            result["variants"][v] = {"first_steps_s": [side(b)[0] for b in batches[:warmup]]}
        for r in range(rounds):
            for v in order[r % len(order):] + order[:r % len(order)]:
                times[v].append(sides[v](batches[warmup + r]))
            for shape, matmul in matmuls.items():
                peak[shape].append(_matmul_rates(matmul, shape))
        for v in VARIANTS:
            result["variants"][v].update(_profile(*built[v], profile_steps,
                                                  os.path.join(work, f"trace_{v}")))
    if peer is not None:
        peer.stop()
    for v in sides:
        result["variants"][v].update(step_s=[t[0] for t in times[v]],
                                     cpu_s=[t[1] for t in times[v]])
    lengths = [b["input_mask"].sum(axis=1) for b in batches[warmup:warmup + rounds]]
    result["useful_flops"] = [training_flops(size, float(n.sum()), float((n * n).sum()))
                              for n in lengths]
    result["positions"] = [int(b["input_mask"].size) for b in batches[warmup:warmup + rounds]]
    result["tokens"] = [int(n.sum()) for n in lengths]
    result["peak_gflops"] = {"x".join(map(str, s)): statistics.median(g for g, _ in rates)
                             for s, rates in peak.items()}
    result["cpu_peak_gflops"] = {"x".join(map(str, s)): statistics.median(c for _, c in rates)
                                 for s, rates in peak.items()}
    result["cores"] = os.cpu_count()
    result["load_average_end"] = os.getloadavg()
    return result


def _profile(step, iterator, model, optimizer, steps: int, log_dir: str) -> dict:
    """`steps` steps under TensorFlow's profiler: op time per category and the top ops."""
    import tensorflow as tf
    del model
    tf.profiler.experimental.start(log_dir)
    for _ in range(steps):
        _run(step, iterator)
    tf.profiler.experimental.stop()
    inputs = ops.graph_inputs(step.get_concrete_function(iterator))
    scopes = {n.split("/")[0] for n in inputs if n.startswith("bert_classifier")}
    op_seconds = ops.op_times(ops.trace_file(log_dir))
    categories = ops.categorised(op_seconds, inputs, scopes | {"gradient_tape"},
                                 optimizer.name)
    top = sorted(op_seconds.items(), key=lambda item: -item[1])[:25]
    return {"op_ms_per_step": {k: 1e3 * s / steps for k, s in categories.items()},
            "top_ops": [[f"{n}:{t}", 1e3 * s / steps] for (n, t), s in top]}


def _rss_mb(field: str) -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise OSError(f"no {field} in /proc/self/status")


def memory_of(case_variant: str, steps: int, glue_dir: str, vocab_file: str) -> dict:
    """In this (fresh) process: resident memory with the case built, and the peak over `steps`
    steps from there."""
    from bench.speed.worker import _reset_peak_rss
    from training import trainer as trainer_module
    case, variant = case_variant.rsplit(":", 1)
    model_name, data = case.split("/")
    task, arrays = case_arrays(data, glue_dir, vocab_file)
    step, iterator, model, _ = build_step(model_name, task, arrays, variant == "packed",
                                          tempfile.mkdtemp(prefix="memory_step_"),
                                          _batching(data))
    lengths = [b["input_mask"].sum(axis=1) for b in host_batches(arrays, steps, _batching(data))]
    built = _rss_mb("VmRSS")
    _reset_peak_rss()
    with trainer_module._graph_options(model):  # pylint: disable=protected-access
        seconds = [_run(step, iterator)[0] for _ in range(steps)]
    return {"built_rss_mb": built, "peak_rss_mb": _rss_mb("VmHWM"), "step_s": seconds,
            "longest": [int(n.max()) for n in lengths], "tokens": [int(n.sum()) for n in lengths]}


def measure_memory(cases: list[str], steps: int, repeats: int, args) -> dict:
    """Each case's variants in fresh processes, the order alternated over `repeats` rounds."""
    found = {}
    for case in cases:
        for r in range(repeats):
            for variant in (VARIANTS if r % 2 == 0 else VARIANTS[::-1]):
                output = subprocess.run(
                    [sys.executable, "-m", "bench.profile.training_step",
                     f"--memory_case={case}:{variant}", f"--memory_steps={steps}",
                     f"--glue_dir={args.glue_dir}", f"--vocab_file={args.vocab_file}"],
                    cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout
                found.setdefault(case, {}).setdefault(variant, []).append(
                    json.loads(output.strip().splitlines()[-1]))
                print(f"{case} {variant}: {found[case][variant][-1]['peak_rss_mb']:.0f} MB",
                      flush=True)
    return found


def define_flags() -> None:
    """The benchmark's flags, defined where it runs as the main module (bench/support.py)."""
    shared = shared_data_dir()
    flags.DEFINE_list("cases", None, "model/data cases (default: PROFILE_CASES, or MEMORY_CASES "
                      "with --memory).")
    flags.DEFINE_bool("memory", False, "Peak memory instead of the profile.")
    flags.DEFINE_integer("rounds", None, "Timed rounds per case (default: 4 for bert_base, 16 for "
                         "minilm).")
    flags.DEFINE_integer("profile_steps", 3, "Steps under the profiler.")
    flags.DEFINE_integer("memory_steps", 4, "Steps whose peak memory is measured.")
    flags.DEFINE_integer("memory_repeats", 2, "Fresh processes of each variant, alternated.")
    flags.DEFINE_string("memory_case", None, "Internal: the case:variant of one fresh process.")
    flags.DEFINE_string("glue_dir", os.path.join(shared, "glue"), "The GLUE tasks' folders.")
    flags.DEFINE_string("vocab_file", os.path.join(shared, "vocab", "uncased_vocab.txt"),
                        "Google's uncased vocabulary.")
    define_output_dir_flag("training_step_profile", "profile_results.{json,md}")


def main(argv: list[str]) -> None:
    del argv
    from bench.profile import report
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if FLAGS.memory_case:
        print(json.dumps(memory_of(FLAGS.memory_case, FLAGS.memory_steps, FLAGS.glue_dir,
                                   FLAGS.vocab_file)))
        return
    stem = os.path.join(FLAGS.output_dir, "profile_results")
    results = read_json(stem + ".json", {})
    cases = FLAGS.cases or list(MEMORY_CASES if FLAGS.memory else PROFILE_CASES)
    command = "python -m bench.profile.training_step " + " ".join(sys.argv[1:])
    part = {"machine": machine_description(), "command": command.strip()}
    if FLAGS.memory:
        part["cases"] = measure_memory(cases, FLAGS.memory_steps, FLAGS.memory_repeats, FLAGS)
        results["memory"] = part
    else:
        part["cases"] = {}
        for case in cases:
            rounds = FLAGS.rounds or (4 if case.startswith("bert_base") else 16)
            part["cases"][case] = profile_case(case, rounds, FLAGS.profile_steps, FLAGS.glue_dir,
                                               FLAGS.vocab_file)
            print(report.profile_table({case: part["cases"][case]}), flush=True)
        results["profile"] = part
    write_report(stem, results, report.markdown(results))
    print(report.markdown(results))


if __name__ == "__main__":
    define_flags()
    entry_point.run(main)
