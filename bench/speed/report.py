"""The benchmark's report: a markdown table (RESULTS.md) and a plot of the ratios (results.png)."""
from __future__ import annotations

import os
import statistics

from bench.speed.cases import Case, case_flops
from bench.speed.contenders import CONTENDERS
from bench.support import write_text

_SHORT = {"this_project": "this", "transformers": "HF", "keras_hub": "KerasHub",
          "this_project_xla": "this, XLA", "this_project_no_xla": "this, no XLA"}


def machine_peak(results: dict) -> dict[str, float]:
    """Best median matmul GFLOP/s per dtype over frameworks and shapes."""
    peak = {}
    for row in results["peak"]:
        peak[row["dtype"]] = max(peak.get(row["dtype"], 0.0), row["gflops"])
    return peak


def case_summary(result: dict, peak: dict[str, float]) -> dict:
    """Medians, utilisation and paired ratios of one case."""
    case = Case.from_dict(result["case"])
    flops = case_flops(case)
    keys = list(result["contenders"])
    summary = {"case": case, "contenders": {}, "ratios": {}}
    for key, values in result["contenders"].items():
        wall = statistics.median(values["wall_s"])
        summary["contenders"][key] = {
            "seq_per_s": case.batch_size / wall, "latency_ms": 1e3 * wall,
            "mfu": flops / wall / 1e9 / peak[case.dtype],
            "cpu_s": statistics.median(values["cpu_s"]),
            "input_batches_per_s": values.get("input_batches_per_s"),
            "peak_rss_mb": values.get("peak_rss_mb")}
    for key in keys[1:]:
        ours = result["ours_paired"][key]
        paired = sorted(p / o for p, o in zip(result["contenders"][key]["wall_s"], ours))
        summary["ratios"][key] = (statistics.median(paired), paired[0], paired[-1])
    return summary


def _ratio(r) -> str:
    return f"**{r[0]:.2f}x** ({r[1]:.2f}-{r[2]:.2f})"


def markdown(results: dict) -> str:
    peak = machine_peak(results)
    summaries = [case_summary(r, peak) for r in results["cases"]]
    keys = list(results["cases"][0]["contenders"]) if results["cases"] else []
    machine = results["machine"]
    lines = [
        "# Speed: this project, transformers (PyTorch) and KerasHub on CPU", "",
        f"Command: `{results['command']}` ({results['total_seconds'] / 60:.0f} min).", "",
        f"Machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB; "
        f"ISA flags: {', '.join(machine['isa']) or 'none listed'}; load average "
        f"{machine['load_average_start'][0]:.1f} at the start, "
        f"{machine['load_average_end'][0]:.1f} at the end. "
        + ", ".join(f"{k} {v}" for k, v in machine["versions"].items()) + ".", "",
        "Matmul peak (median GFLOP/s over alternated calls; the best per dtype is the peak the "
        "utilisation figures use; from CPU time: the rate with every core to itself, an estimate "
        "where other work shares the machine):", "",
        "| framework | dtype | m x k x n | GFLOP/s | best call | from CPU time |",
        "|---|---|---|---|---|---|"]
    for row in results["peak"]:
        cpu = f"{row['cpu_gflops']:.0f}" if "cpu_gflops" in row else "-"
        lines.append(f"| {row['framework']} | {row['dtype']} | {' x '.join(map(str, row['shape']))}"
                     f" | {row['gflops']:.0f} | {row['best_gflops']:.0f} | {cpu} |")
    lines += _small_product_lines(results.get("small_products", []))
    names = " / ".join(_SHORT.get(k, k) for k in keys)
    lines += ["", "Throughput in sequences/s (median over the rounds), latency of one call, model-"
              "FLOPs utilisation against the peak of the case's dtype (a bfloat16 case above 100% "
              "ran its products faster than the bfloat16 matmul peak: XLA on a CPU without AMX "
              "computes them in float32), CPU seconds the process used per call (2 per "
              "second of latency when it has both cores to itself); ratio = peer's time / this "
              "project's time in the same round (median, min-max over the rounds; above 1 means "
              "this project is faster); peak memory = the worker process's peak resident memory over the "
              "case (build, first calls and timed rounds; the framework's own libraries "
              "included), in GB.", "",
              f"| case | rounds | seq/s {names} | latency ms {names} | MFU % {names} | "
              f"CPU s {names} | peak memory GB {names} | "
              + " | ".join(f"vs {CONTENDERS[k].name}" for k in keys[1:]) + " |",
              "|---|---|---|---|---|---|---|" + "---|" * len(keys[1:])]
    for s, result in zip(summaries, results["cases"]):
        c = s["contenders"]
        lines.append(
            f"| {s['case'].key} | {result['rounds']} | "
            + " / ".join(f"{c[k]['seq_per_s']:.1f}" for k in keys) + " | "
            + " / ".join(f"{c[k]['latency_ms']:.0f}" for k in keys) + " | "
            + " / ".join(f"{100 * c[k]['mfu']:.0f}" for k in keys) + " | "
            + " / ".join(f"{c[k]['cpu_s']:.2f}" for k in keys) + " | "
            + " / ".join(_gigabytes(c[k]["peak_rss_mb"]) for k in keys) + " | "
            + " | ".join(_ratio(s["ratios"][k]) for k in keys[1:]) + " |")
    lines += _input_pipeline_lines(summaries, keys[0] if keys else None)
    for update in results.get("updated", []):
        lines += ["", f"Measured again with `--update` (load average "
                  f"{update['load_average'][0]:.1f}): {', '.join(update['cases'])}."]
    for failure in results.get("failed", []):
        lines += ["", f"Failed: {failure['case']}: `{failure['error'].strip().splitlines()[-1]}`"]
    return "\n".join(lines) + "\n"


def _gigabytes(megabytes: float | None) -> str:
    return "-" if megabytes is None else f"{megabytes / 1024:.1f}"


def _small_product_lines(rows: list[dict]) -> list[str]:
    """Microseconds per product, per dtype and shape: TensorFlow with XLA, as a graph, PyTorch."""
    if not rows:
        return []
    columns = (("tensorflow", True), ("tensorflow", False), ("torch", None))
    table = {}
    for row in rows:
        key = (row["dtype"], tuple(row["shape"]))
        table.setdefault(key, {})[(row["framework"], row["xla"])] = row["us_per_product"]
    lines = ["", "The small model's batch-1 products (x 128 tokens), timed as chains of dependent "
             "products in one call (median microseconds per product over alternated calls; the "
             "encoder runs these with XLA):", "",
             "| dtype | m x k x n | TensorFlow, XLA | TensorFlow, graph | PyTorch |",
             "|---|---|---|---|---|"]
    for (dtype, shape), values in table.items():
        cells = " | ".join(f"{values[c]:.0f}" if c in values else "-" for c in columns)
        lines.append(f"| {dtype} | {' x '.join(map(str, shape))} | {cells} |")
    return lines


def _input_pipeline_lines(summaries: list[dict], key: str | None) -> list[str]:
    rows = [(s["case"], s["contenders"][key]) for s in summaries
            if key and s["contenders"][key].get("input_batches_per_s")]
    if not rows:
        return []
    lines = ["", "Input pipeline of the training step (TFRecords -> tf.data, measured alone) "
             "against the steps it feeds:", "", "| case | input batches/s | training steps/s |",
             "|---|---|---|"]
    for case, values in rows:
        steps = values["seq_per_s"] / case.batch_size
        lines.append(f"| {case.key} | {values['input_batches_per_s']:.0f} | {steps:.2f} |")
    return lines


def plot(results: dict, path: str) -> None:
    """Horizontal bars of the ratios per case and peer, min-max as error bars."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    peak = machine_peak(results)
    summaries = [case_summary(r, peak) for r in results["cases"]]
    peers = list(summaries[0]["ratios"]) if summaries else []
    height = 0.8 / max(1, len(peers))
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(summaries) + 1.5))
    for j, peer in enumerate(peers):
        ys = [i + j * height for i in range(len(summaries))]
        ratios = [s["ratios"][peer] for s in summaries]
        ax.barh(ys, [r[0] for r in ratios], height=height, label=f"vs {CONTENDERS[peer].name}",
                xerr=[[r[0] - r[1] for r in ratios], [r[2] - r[0] for r in ratios]], capsize=2)
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_yticks([i + height * (len(peers) - 1) / 2 for i in range(len(summaries))])
    ax.set_yticklabels([s["case"].key for s in summaries], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("speed ratio: this project / peer (peer's time / this project's time)")
    ax.set_title(f"BERT on {results['machine']['cores']} CPU cores: median and min-max over "
                 "alternated rounds", fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(results: dict, output_dir: str) -> None:
    """RESULTS.md and results.png in `output_dir`, each written whole or not at all."""
    write_text(os.path.join(output_dir, "RESULTS.md"), markdown(results))
    temp_path = os.path.join(output_dir, f".results.{os.getpid()}.png")
    try:
        plot(results, temp_path)
        os.replace(temp_path, os.path.join(output_dir, "results.png"))
    finally:
        if os.path.exists(temp_path):
            os.unlink(temp_path)
