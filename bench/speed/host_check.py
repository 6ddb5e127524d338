"""What one host gives the kernels of this project and of transformers: to tell apart two hosts of
one kind on which the same code runs at different speeds.

Each framework runs in fresh processes of its own, the rounds alternating between them:
- the CPU as the virtual machine shows it (`lscpu`): model, logical CPUs, threads per core (SMT
  siblings share one core's vector units), caches, hypervisor, the ISA flags that pick kernels;
- the instruction set each library's kernels dispatch to, from the libraries themselves: oneDNN's
  (TensorFlow's matmuls, `ONEDNN_VERBOSE`), oneMKL's (PyTorch's, `MKL_VERBOSE`) and PyTorch's CPU
  capability; a flag the VM shows but a library does not use shows up here;
- the threads each framework runs its ops with (intra-op, inter-op);
- float32 matmul GFLOP/s of the fine-tuning step's products at MiniLM's sizes (2,048 tokens,
  H=384, I=1536: the feed-forward products, and the weight gradient's, whose first operand is
  transposed) and the memory bandwidth of an elementwise add over 64 MB arrays (what the
  optimizer's update and the step's elementwise ops are bound by);
- the CPU time the hypervisor took (`steal` in /proc/stat) and the load average meanwhile.

Results accumulate in --results, one entry per --host label, and its report (`.md` beside it)
puts the hosts side by side.

    python -m bench.speed.host_check --host="EPYC host A"
    python -m bench.speed.host_check --report_only
"""
from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import time

from absl import app
from absl import flags

from bench.support import (REPO_ROOT, define_report_only_flag, machine_description, machine_label,
                           read_json, results_dir, write_json, write_text)
from utils import entry_point

FLAGS = flags.FLAGS

FRAMEWORKS = ("tensorflow", "torch")
# (m, k, n, first operand transposed): [tokens, H] x [H, I], [tokens, I] x [I, H], and the
# weight gradient [tokens, H]^T x [tokens, I].
PRODUCTS = ((2048, 384, 1536, False), (2048, 1536, 384, False), (384, 2048, 1536, True))
BANDWIDTH_ELEMENTS = 16 * 2**20  # 64 MB of float32 an operand
_LSCPU_FIELDS = ("Model name", "CPU(s)", "Thread(s) per core", "Core(s) per socket", "Socket(s)",
                 "NUMA node(s)", "L2 cache", "L3 cache", "Hypervisor vendor", "CPU max MHz",
                 "BogoMIPS")
_EXTRA_FLAGS = ("avx512bw", "avx512vl", "avx512_vnni", "avx_vnni")
# Environment variables that change the threads or the kernels of either framework.
_ENVIRONMENT = ("TF_ENABLE_ONEDNN_OPTS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS",
                "OMP_NUM_THREADS", "MKL_NUM_THREADS", "ONEDNN_MAX_CPU_ISA",
                "MKL_ENABLE_INSTRUCTIONS", "KMP_AFFINITY", "OMP_PROC_BIND")


# ---------------------------------------------------------------------------------------------
# In the child process of one framework.

def _framework_ops(framework: str):
    """(random matrix, matmul(a, b, transpose_a), add, intra-op threads, inter-op threads)."""
    if framework == "tensorflow":
        import tensorflow as tf
        return (lambda *shape: tf.random.normal(shape),
                lambda a, b, t: tf.matmul(a, b, transpose_a=t),  # eager ops on CPU: synchronous
                lambda a, b: tf.add(a, b),
                _auto(tf.config.threading.get_intra_op_parallelism_threads()),
                _auto(tf.config.threading.get_inter_op_parallelism_threads()))
    import torch
    out = {}

    def add(a, b):  # into a kept buffer, as TensorFlow's allocator reuses its buffer
        return torch.add(a, b, out=out.setdefault(a.shape, torch.empty_like(a)))
    return (lambda *shape: torch.randn(*shape),
            lambda a, b, t: (a.T if t else a) @ b,
            add, torch.get_num_threads(), torch.get_num_interop_threads())


def _auto(threads: int) -> str:
    """TensorFlow's thread setting; 0 is its default, a thread per CPU this process may use."""
    return str(threads) if threads else f"default ({len(os.sched_getaffinity(0))})"


def child_rates(framework: str, repeats: int) -> dict:
    """Median GFLOP/s of each product and GB/s of the add, and the framework's threads."""
    random, matmul, add, intra, inter = _framework_ops(framework)
    rates = {}
    for m, k, n, transposed in PRODUCTS:
        a, b = random(*((k, m) if transposed else (m, k))), random(k, n)
        rates[f"{m}x{k}x{n}{' (A transposed)' if transposed else ''}"] = 2 * m * k * n / 1e9 / \
            _median_seconds(lambda: matmul(a, b, transposed), repeats)
    a, b = random(BANDWIDTH_ELEMENTS), random(BANDWIDTH_ELEMENTS)
    gbs = 3 * 4 * BANDWIDTH_ELEMENTS / 1e9 / _median_seconds(lambda: add(a, b), repeats)
    return {"matmul_gflops": rates, "add_gbs": gbs, "intra_op_threads": intra,
            "inter_op_threads": inter}


def _median_seconds(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def child_isa(framework: str) -> None:
    """One matmul, for the library's verbose mode to name the instruction set it dispatches to."""
    random, matmul, _, _, _ = _framework_ops(framework)
    matmul(random(256, 256), random(256, 256), False)
    if framework == "torch":
        import torch
        print(f"torch_cpu_capability: {torch.backends.cpu.get_cpu_capability()}")


# ---------------------------------------------------------------------------------------------
# In the parent.

def _child(framework: str, mode: str, env: dict | None = None, repeats: int = 20
           ) -> tuple[str, str]:
    """(stdout, stderr) of a child process of `framework` in `mode`."""
    command = [sys.executable, "-m", "bench.speed.host_check", f"--child={framework}",
               f"--child_mode={mode}", f"--repeats={repeats}"]
    done = subprocess.run(command, cwd=REPO_ROOT, env={**os.environ, **(env or {})},
                          capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"{' '.join(command[2:])} failed:\n{done.stderr[-3000:]}")
    return done.stdout, done.stderr


def dispatched_isa() -> dict:
    """The instruction set oneDNN (TensorFlow) and oneMKL and PyTorch say they use."""
    return parsed_isa("".join(_child("tensorflow", "isa", {"ONEDNN_VERBOSE": "1"})),
                      "".join(_child("torch", "isa", {"MKL_VERBOSE": "1"})))


def parsed_isa(tensorflow_log: str, torch_log: str) -> dict:
    """The ISA lines of oneDNN's verbose log (TensorFlow) and of oneMKL's (PyTorch)."""
    return {"tensorflow_onednn": _first(r"onednn_verbose,(?:v\d+,)?info,cpu,isa:(.*)",
                                        tensorflow_log),
            "torch_mkl": _first(r"MKL_VERBOSE (?:oneMKL|Intel\(R\) MKL) (.*?), Lnx", torch_log),
            "torch_cpu_capability": _first(r"torch_cpu_capability: (\S+)", torch_log)}


def _first(pattern: str, text: str) -> str:
    match = re.search(pattern, text)
    return match.group(1).strip() if match else "not reported"


def lscpu() -> dict:
    text = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    found = {key: fields[key].strip() for key in _LSCPU_FIELDS if key in fields}
    flags = fields.get("Flags", "").split()
    found["extra_flags"] = [f for f in _EXTRA_FLAGS if f in flags]
    return found


def _cpu_times() -> list[int]:
    with open("/proc/stat", encoding="ascii") as f:
        return [int(x) for x in f.readline().split()[1:]]


def measure(rounds: int, repeats: int) -> dict:
    """This host's entry: the CPU, the dispatched ISA, and each framework's rates (median over
    `rounds` fresh processes, alternated) with the CPU time stolen meanwhile."""
    before, start_load = _cpu_times(), os.getloadavg()
    samples = {framework: [] for framework in FRAMEWORKS}
    for r in range(rounds):
        for framework in FRAMEWORKS[r % 2:] + FRAMEWORKS[:r % 2]:
            samples[framework].append(json.loads(
                _child(framework, "rates", repeats=repeats)[0].strip().splitlines()[-1]))
            print(f"round {r + 1}/{rounds}: {framework} done", flush=True)
    after = _cpu_times()
    total = sum(after) - sum(before)
    steal = (after[7] - before[7]) if len(after) > 7 else 0
    rates = {framework: _median_of(runs) for framework, runs in samples.items()}
    return {"machine": machine_description(), "lscpu": lscpu(), "isa": dispatched_isa(),
            "environment": {k: os.environ[k] for k in _ENVIRONMENT if k in os.environ},
            "rates": rates, "steal_fraction": steal / total if total else 0.0,
            "load_average": [start_load, os.getloadavg()], "rounds": rounds,
            "repeats": repeats, "date": time.strftime("%Y-%m-%d %H:%M")}


def _median_of(runs: list[dict]) -> dict:
    products = runs[0]["matmul_gflops"]
    return {"matmul_gflops": {p: statistics.median(r["matmul_gflops"][p] for r in runs)
                              for p in products},
            "add_gbs": statistics.median(r["add_gbs"] for r in runs),
            "intra_op_threads": runs[0]["intra_op_threads"],
            "inter_op_threads": runs[0]["inter_op_threads"]}


def report(results: dict) -> str:
    hosts = list(results)
    rows = [("CPU", lambda e: machine_label(e["machine"]))]
    rows += [(key, lambda e, key=key: e["lscpu"].get(key, "-")) for key in _LSCPU_FIELDS[1:]]
    rows += [("more ISA flags", lambda e: ", ".join(e["lscpu"]["extra_flags"]) or "-"),
             ("TensorFlow's oneDNN ISA", lambda e: e["isa"]["tensorflow_onednn"]),
             ("PyTorch's oneMKL ISA", lambda e: e["isa"]["torch_mkl"]),
             ("PyTorch's CPU capability", lambda e: e["isa"]["torch_cpu_capability"])]
    rows.append(("environment", lambda e: ", ".join(
        f"{k}={v}" for k, v in e["environment"].items()) or "none of " + ", ".join(_ENVIRONMENT)))
    for framework in FRAMEWORKS:
        rows.append((f"{framework} threads, intra-op / inter-op", lambda e, f=framework: (
            f"{e['rates'][f]['intra_op_threads']} / {e['rates'][f]['inter_op_threads']}")))
    for product in _product_names(results):
        rows.append((f"matmul {product}, GFLOP/s TF / torch", lambda e, p=product: " / ".join(
            f"{e['rates'][f]['matmul_gflops'][p]:.0f}" for f in FRAMEWORKS)))
    rows += [("add over 64 MB arrays, GB/s TF / torch", lambda e: " / ".join(
                 f"{e['rates'][f]['add_gbs']:.1f}" for f in FRAMEWORKS)),
             ("CPU time stolen by the hypervisor", lambda e: f"{100 * e['steal_fraction']:.1f}%"),
             ("load average, start / end", lambda e: " / ".join(
                 f"{load[0]:.1f}" for load in e["load_average"])),
             ("measured", lambda e: f"{e['date']}, {e['rounds']} rounds of {e['repeats']} calls")]
    lines = ["# What each host gives the kernels", "",
             "`python -m bench.speed.host_check --host=LABEL` on each host; medians over fresh "
             "processes, the frameworks alternated.", "",
             "| | " + " | ".join(hosts) + " |", "|---" * (len(hosts) + 1) + "|"]
    lines += [f"| {name} | " + " | ".join(str(value(results[h])) for h in hosts) + " |"
              for name, value in rows]
    return "\n".join(lines) + "\n"


def _product_names(results: dict) -> list[str]:
    return list(next(iter(results.values()))["rates"]["tensorflow"]["matmul_gflops"])


def define_flags() -> None:
    """The benchmark's flags, defined where it runs as the main module (bench/support.py)."""
    flags.DEFINE_string("host", None, "This host's label in the results (required to measure).")
    flags.DEFINE_integer("rounds", 4, "Fresh processes of each framework, alternated.")
    flags.DEFINE_integer("repeats", 20, "Timed calls per process.")
    flags.DEFINE_string("results", os.path.join(results_dir("host_check"),
                                                "host_check_results.json"),
                        "The hosts' results; their report goes beside it (.md).")
    define_report_only_flag()
    flags.DEFINE_enum("child", None, FRAMEWORKS, "Internal: measure in this framework's process.")
    flags.DEFINE_enum("child_mode", None, ["rates", "isa"], "Internal: what the child measures.")


def main(argv: list[str]) -> None:
    del argv
    if FLAGS.child:
        if FLAGS.child_mode == "isa":
            child_isa(FLAGS.child)
        else:
            print(json.dumps(child_rates(FLAGS.child, FLAGS.repeats)))
        return
    results = read_json(FLAGS.results, {})
    if not FLAGS.report_only:
        if not FLAGS.host:
            raise app.UsageError("--host is required to measure (a label for this host)")
        results[FLAGS.host] = measure(FLAGS.rounds, FLAGS.repeats)
        write_json(FLAGS.results, results)
    if not results:
        raise app.UsageError(f"no results in {FLAGS.results}")
    write_text(os.path.splitext(FLAGS.results)[0] + ".md", report(results))
    print(report(results))


if __name__ == "__main__":
    define_flags()
    entry_point.run(main)
