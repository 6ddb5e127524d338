"""Tables of `bench/profile/training_step.py`'s results: where a step's time goes, and memory."""
from __future__ import annotations

import statistics

from bench.profile.ops import CATEGORIES
from bench.profile.useful_flops import utilisation

_MODELS = {"bert_base": "BERT-Base", "minilm": "MiniLM-L6"}
_DATA = {"full": "32 x 128 full", "mrpc": "MRPC", "sst2": "SST-2",
         "mrpc_by_length": "MRPC by length", "sst2_by_length": "SST-2 by length"}
VARIANTS = ("packed", "padded")
SIDES = (*VARIANTS, "transformers")  # this project packed and padded; transformers' step
_SIDE_NAMES = {"packed": "packed", "padded": "padded", "transformers": "transformers"}


def case_name(case: str) -> str:
    model, data = case.split("/")
    return f"{_MODELS.get(model, model)} {_DATA.get(data, data)}"


def variant_summary(result: dict, variant: str) -> dict:
    """Median step time; useful-token MFU (median over the rounds) against the matmul rate
    measured in the same rounds (the best shape's median), from wall time and from CPU time
    (every core to itself); op time and its shares; the time ratio to the packed step."""
    values = result["variants"][variant]
    peak = max(result["peak_gflops"].values())
    steps = values["step_s"]
    mfu = [utilisation(f, s, peak) for f, s in zip(result["useful_flops"], steps)]
    cpu_mfu = None
    if "cpu_s" in values:
        cpu_peak = max(result["cpu_peak_gflops"].values())
        cpu_mfu = statistics.median(utilisation(f * result["cores"], s, cpu_peak)
                                    for f, s in zip(result["useful_flops"], values["cpu_s"]))
    op_ms = values.get("op_ms_per_step")  # this project's sides only
    total = sum(op_ms.values()) if op_ms else None
    packed = result["variants"]["packed"]["step_s"]
    ratios = sorted(s / p for s, p in zip(steps, packed))
    return {"step_ms": 1e3 * statistics.median(steps), "mfu": statistics.median(mfu),
            "cpu_mfu": cpu_mfu, "op_ms": total,
            "shares": {k: v / total for k, v in op_ms.items()} if op_ms else None,
            "ratio": (statistics.median(ratios), ratios[0], ratios[-1]), "peak": peak}


def profile_table(cases: dict) -> str:
    """Rows: wall time, ratio, MFU, batch shape, op time and each category's share; one column
    per case and variant."""
    columns = [(case, v) for case in cases for v in SIDES if v in cases[case]["variants"]]
    summaries = {(case, v): variant_summary(cases[case], v) for case, v in columns}
    header = "| | " + " | ".join(f"{case_name(c)}, {_SIDE_NAMES[v]}" for c, v in columns) + " |"
    lines = [header, "|---|" + "---|" * len(columns)]

    def row(label, cell):
        lines.append(f"| {label} | " + " | ".join(cell(c, v) for c, v in columns) + " |")

    row("step wall time, ms (median)", lambda c, v: f"{summaries[c, v]['step_ms']:.0f}")
    row("time against packed, same batches (median, min-max)", lambda c, v: "1" if v == "packed"
        else "{:.2f}x ({:.2f}-{:.2f})".format(*summaries[c, v]["ratio"]))
    row("useful-token MFU, from wall / CPU time", lambda c, v: _mfu_cell(summaries[c, v]))
    row("real tokens / positions computed per batch (mean)", lambda c, v: _shape_cell(cases[c], v))
    row("op time per step, ms", lambda c, v: "-" if summaries[c, v]["op_ms"] is None
        else f"{summaries[c, v]['op_ms']:.0f}")
    for category in CATEGORIES:
        row(category, lambda c, v, k=category: "-" if summaries[c, v]["shares"] is None
            else f"{100 * summaries[c, v]['shares'][k]:.1f}%")
    return "\n".join(lines)


def _mfu_cell(summary: dict) -> str:
    cpu = "-" if summary["cpu_mfu"] is None else f"{100 * summary['cpu_mfu']:.0f}%"
    return f"{100 * summary['mfu']:.0f}% / {cpu}"


def _shape_cell(result: dict, variant: str) -> str:
    tokens = statistics.mean(result["tokens"])
    if variant == "packed":  # rows rounded up to a multiple of 16 (modeling/layers/packing.py)
        positions = statistics.mean(-(-n // 16) * 16 for n in result["tokens"])
    else:
        positions = statistics.mean(result["positions"])
    return f"{tokens:.0f} / {positions:.0f}"


def memory_table(cases: dict) -> str:
    """Per case: each variant's resident memory when built and its peak (median over the fresh
    processes), and the step's own growth."""
    lines = ["| case | longest rows of its batches | packed: built / peak GB | "
             "padded: built / peak GB | step's growth, packed / padded GB |",
             "|---|---|---|---|---|"]
    for case, variants in cases.items():
        cells, growth = [], []
        for v in VARIANTS:
            built = statistics.median(r["built_rss_mb"] for r in variants[v]) / 1024
            peak = statistics.median(r["peak_rss_mb"] for r in variants[v]) / 1024
            cells.append(f"{built:.2f} / {peak:.2f}")
            growth.append(f"{peak - built:.2f}")
        longest = ", ".join(map(str, variants["packed"][0]["longest"]))
        lines.append(f"| {case_name(case)} | {longest} | {cells[0]} | {cells[1]} | "
                     f"{' / '.join(growth)} |")
    return "\n".join(lines)


def markdown(results: dict) -> str:
    lines = ["# The training step, profiled: packed against padded", ""]
    if "profile" in results:
        part = results["profile"]
        peaks = {c: max(r["peak_gflops"].values()) for c, r in part["cases"].items()}
        lines += [f"`{part['command']}` on {_machine(part['machine'])}. Float32 matmul peak "
                  "(median over the rounds, best shape), per case: "
                  + ", ".join(f"{case_name(c)} {p:.0f} GFLOP/s" for c, p in peaks.items())
                  + ". Shares are of the op time (the sum of the trace's op events).", "",
                  profile_table(part["cases"]), ""]
    if "memory" in results:
        part = results["memory"]
        lines += [f"`{part['command']}` on {_machine(part['machine'])}.", "",
                  memory_table(part["cases"]), ""]
    return "\n".join(lines)


def _machine(machine: dict) -> str:
    return (f"{machine['cpu']}, {machine['cores']} cores ({', '.join(machine['isa'])}), load "
            f"average {machine['load_average_start'][0]:.1f} at the start")
