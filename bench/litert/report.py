"""The LiteRT benchmark's report (`bench/litert/compare.py`): a markdown table of each model's
sides, with the machine and each model's dev set."""
from __future__ import annotations

from bench.litert.sides import MODELS


_NAMES = {"encoder": "all-MiniLM-L6-v2 sentence vectors", "mrpc": "MiniLM fine-tuned on MRPC",
          "sst2": "MiniLM fine-tuned on SST-2"}
_SIDES = {"litert_none": "LiteRT float32", "litert_float16": "LiteRT float16",
          "litert_dynamic_int8": "LiteRT int8 (dynamic range)", "saved_model": "SavedModel",
          "transformers": "transformers (PyTorch)"}


def report(results: dict) -> str:
    """The results as a markdown table, with the machine and each model's dev set."""
    machine = results.get("machine", {})
    lines = [f"{machine.get('cpu', '?')}, {machine.get('cores', '?')} cores, CPU flags "
             f"{' '.join(results.get('cpu_flags', []))}", ""]
    table = ["| model | side | size MB | max difference from the SavedModel: tokenized alike "
             "(otherwise) | dev metric | one sentence ms | SavedModel / this, one sentence | "
             "examples/s | SavedModel / this, dev set |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name in MODELS:
        if name not in results.get("models", {}):
            continue
        entry = results["models"][name]
        load = entry.get("load_average", [[0], [0]])
        lines.append(f"- {_NAMES[name]}: {entry['examples']} dev examples, "
                     f"{entry.get('tokenized_otherwise', 0)} tokenized otherwise by "
                     f"FastBertTokenizer; {entry['metric']}; {entry['threads']} threads a side; "
                     f"load average {load[0][0]:.1f} -> {load[1][0]:.1f}")
        for label, side in entry["sides"].items():
            size = f"{side['size_bytes'] / 1e6:.1f}" if side["size_bytes"] else ""
            otherwise = side.get("max_abs_difference_tokenized_otherwise")
            difference = f"{side['max_abs_difference']:.2g}" + (
                f" ({otherwise:.2g})" if otherwise is not None else "")
            table.append(
                f"| {_NAMES[name]} | {_SIDES[label]} | {size} | {difference} | "
                f"{side['dev_metric']:.4f} | {side['latency_ms']:.1f} | "
                f"{side['latency_ratio']:.2f}x | {side['examples_per_second']:.0f} | "
                f"{side['throughput_ratio']:.2f}x |")
    return "\n".join(lines + [""] + table)
