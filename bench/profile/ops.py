"""Where a TensorFlow step's time goes, per op, from the profiler's trace (`*.xplane.pb`).

TensorFlow's profiler (`tf.profiler.experimental.start` / `stop`) records every op the executor
runs as an event named "op_name:OpType" on the inter-op threads (`tf_Compute/...`), from the op's
start to its end, the intra-op work it hands to the Eigen threads included; an XLA computation
(here the optimizer's in-place updates of its large variables) runs as a
`CpuExecutable::ExecuteAsyncOnStream` event. `tensorboard_plugin_profile` builds its op statistics
from the same events; it is not installed here, so this module sums them itself, per category
(`CATEGORIES`), from the op's type and name scope. The ops that a custom gradient creates (the
GELU's and LayerNorm's derivatives, and their forward ops) have no name scope: they are placed by
the nearest scoped op among their inputs in the step's graph.

Op time is the sum of the op events. On 2 cores the executor may run two ops at once, and an op
descheduled by other work on the machine lasts longer: the shares say where the step's work goes,
the step's own wall time is measured apart.
"""
from __future__ import annotations

import collections
import glob
import os

# In the order of the tables.
CATEGORIES = ("matmul forward", "matmul backward", "optimizer update", "LayerNorm", "GELU",
              "softmax", "dropout", "packing gather/scatter", "head transposes", "bias add",
              "embeddings", "casts", "other")
# Ops that move the packed rows to and from their places in attention's groups of rows (and
# their gradients).
_PACKING_TYPES = {"ScatterNd", "GatherNd", "GatherV2", "UnsortedSegmentSum", "StridedSlice",
                  "StridedSliceGrad", "Where", "PadV2", "Minimum", "SplitV", "ConcatV2",
                  "SelectV2", "ZerosLike"}
# The name-scope words that place an unscoped op, most specific first.
_REGIONS = ("layer_norm", "dropout", "softmax", "intermediate")
_XLA_EVENT = "CpuExecutable::ExecuteAsyncOnStream"


def trace_file(log_dir: str) -> str:
    """The newest `*.xplane.pb` under `log_dir`."""
    paths = glob.glob(os.path.join(log_dir, "**", "*.xplane.pb"), recursive=True)
    if not paths:
        raise FileNotFoundError(f"no *.xplane.pb under {log_dir}")
    return max(paths, key=os.path.getmtime)


def op_times(path: str) -> dict[tuple[str, str], float]:
    """Seconds per (op name, op type) in the trace's host plane, input pipeline left out; XLA
    computations as ("xla", "XlaExecutable")."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2
    space = xplane_pb2.XSpace()
    with open(path, "rb") as f:
        space.ParseFromString(f.read())
    times = collections.Counter()
    for plane in space.planes:
        if plane.name != "/host:CPU":
            continue
        names = {key: meta.name for key, meta in plane.event_metadata.items()}
        for line in plane.lines:
            if line.name.startswith("tf_data"):
                continue
            for event in line.events:
                name = names[event.metadata_id]
                if name == _XLA_EVENT:
                    times[("xla", "XlaExecutable")] += event.duration_ps * 1e-12
                elif ":" in name and "::" not in name and " " not in name:
                    op_name, op_type = name.rsplit(":", 1)
                    times[(op_name, op_type)] += event.duration_ps * 1e-12
    return dict(times)


def graph_inputs(concrete_function) -> dict[str, list[str]]:
    """Each op's input op names in a traced `tf.function`'s graph."""
    return {op.name: [t.op.name for t in op.inputs]
            for op in concrete_function.graph.get_operations()}


def _region(name: str, inputs: dict[str, list[str]], scopes: set[str]) -> str:
    """`name`, or for an op outside the model's scopes the scope of its nearest scoped input
    (breadth first, the backward pass's ops skipped) that names a region."""
    if name.split("/")[0] in scopes:
        return name
    seen, frontier = {name}, [name]
    for _ in range(8):
        frontier = [i for op in frontier for i in inputs.get(op, []) if i not in seen]
        seen.update(frontier)
        for op in frontier:
            if op.split("/")[0] in scopes and any(r in op.lower() for r in _REGIONS):
                return op
    return name


def categorise(name: str, op_type: str, optimizer_scope: str, num_inputs: int = 2) -> str:
    """The category of one op (a name already placed by `_region`)."""
    lowered = name.lower()
    if op_type == "XlaExecutable" or name.split("/")[0] == optimizer_scope:
        return "optimizer update"
    if "MatMul" in op_type or ("Einsum" in op_type and num_inputs > 1):
        return "matmul backward" if name.startswith("gradient_tape/") else "matmul forward"
    if "Einsum" in op_type:
        return "head transposes"  # a one-operand einsum swaps axes
    for word, category in (("layer_norm", "LayerNorm"), ("dropout", "dropout")):
        if word in lowered:
            return category
    if ("Softmax" in op_type or "softmax" in lowered) and "attention" in lowered:
        return "softmax"  # the attention's (the loss's is "other")
    if "embeddings" in lowered:
        return "embeddings"
    if "packing" in lowered or (op_type in _PACKING_TYPES and "attention" in lowered):
        return "packing gather/scatter"
    if "BiasAdd" in op_type:
        return "bias add"
    if "intermediate" in lowered or "gelu" in lowered:
        return "GELU"
    if op_type == "Cast":
        return "casts"
    return "other"


def categorised(times: dict[tuple[str, str], float], inputs: dict[str, list[str]],
                scopes: set[str], optimizer_scope: str) -> dict[str, float]:
    """Seconds per category (every one of `CATEGORIES`) of `op_times`' result."""
    totals = dict.fromkeys(CATEGORIES, 0.0)
    for (name, op_type), seconds in times.items():
        if op_type != "XlaExecutable" and name.split("/")[0] != optimizer_scope:
            name, num_inputs = _region(name, inputs, scopes), len(inputs.get(name, ()))
        else:
            num_inputs = 0
        totals[categorise(name, op_type, optimizer_scope, num_inputs)] += seconds
    return totals
