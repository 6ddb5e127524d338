"""The training-step profile's pieces: reading a trace, placing ops in categories, the tables."""
import pytest

from bench.profile import ops, report as profile_report
from tests.support.dependencies import require


@pytest.mark.parametrize("name, op_type, category", [
    ("bert_classifier/bert/layer_0/intermediate/MatMul", "_MklMatMul", "matmul forward"),
    ("gradient_tape/bert_classifier/bert/layer_0/attention/MatMul_1/MatMul", "_MklBatchMatMulV2",
     "matmul backward"),
    ("bert_classifier/bert/layer_0/attention/einsum/Einsum", "_MklEinsum", "head transposes"),
    ("AdamWeightDecay/clip_by_global_norm/mul_3", "Mul", "optimizer update"),
    ("xla", "XlaExecutable", "optimizer update"),
    ("bert_classifier/bert/layer_0/output_layer_norm/sub", "Sub", "LayerNorm"),
    ("gradient_tape/bert_classifier/bert/layer_0/dropout/stateless_dropout/SelectV2", "SelectV2",
     "dropout"),
    ("bert_classifier/bert/layer_0/attention/Softmax", "_MklSoftmax", "softmax"),
    ("gradient_tape/bert_classifier/bert/layer_0/attention/GatherNd", "GatherNd",
     "packing gather/scatter"),
    ("bert_classifier/bert/unpacking/ScatterNd", "ScatterNd", "packing gather/scatter"),
    ("gradient_tape/bert_classifier/bert/layer_0/intermediate/BiasAdd/BiasAddGrad", "BiasAddGrad",
     "bias add"),
    ("bert_classifier/bert/layer_0/intermediate/BiasAdd", "Mul", "GELU"),
    ("bert_classifier/bert/embeddings/GatherV2", "GatherV2", "embeddings"),
    ("bert_classifier/Cast", "Cast", "casts"),
    ("SparseSoftmaxCrossEntropyWithLogits", "Sum", "other"),
])
def test_each_op_falls_in_its_category(name, op_type, category):
    num_inputs = 1 if op_type == "_MklEinsum" else 2
    assert ops.categorise(name, op_type, "AdamWeightDecay", num_inputs) == category


def test_ops_outside_the_model_scopes_are_placed_by_their_nearest_scoped_input():
    # A custom gradient's ops: LayerNorm's reads the forward pass's `x - mean`; GELU's, two ops
    # deep, the feed-forward's pre-activation; a loss op reaches no region.
    inputs = {"mul_7": ["bert_classifier/bert/layer_0/output_layer_norm/sub", "mul_6"],
              "mul_9": ["mul_8", "gradient_tape/bert_classifier/bert/layer_0/output/MatMul"],
              "mul_8": ["bert_classifier/bert/layer_0/intermediate/BiasAdd"],
              "Mean": ["bert_classifier/classifier/BiasAdd"]}
    times = {("mul_7", "Mul"): 1.0, ("mul_9", "Mul"): 2.0, ("Mean", "Mean"): 4.0,
             ("AdamWeightDecay/sub", "Sub"): 8.0, ("xla", "XlaExecutable"): 16.0}
    totals = ops.categorised(times, inputs, {"bert_classifier", "gradient_tape"},
                             "AdamWeightDecay")
    assert list(totals) == list(ops.CATEGORIES)
    assert {k: v for k, v in totals.items() if v} == {
        "LayerNorm": 1.0, "GELU": 2.0, "other": 4.0, "optimizer update": 24.0}


def test_op_times_read_a_real_trace(tmp_path):
    """The events TensorFlow's profiler writes for a graph's ops are read back per op."""
    tf = require("tensorflow")
    a = tf.random.normal([256, 256])

    @tf.function
    def products(x):
        with tf.name_scope("attention"):
            return tf.nn.softmax(tf.matmul(x, x))
    products(a)
    tf.profiler.experimental.start(str(tmp_path))
    for _ in range(3):
        products(a).numpy()
    tf.profiler.experimental.stop()
    times = ops.op_times(ops.trace_file(str(tmp_path)))
    names = {name: op_type for name, op_type in times}
    assert "MatMul" in names.get("attention/MatMul", "")
    assert all(" " not in name and seconds > 0 for (name, _), seconds in times.items())
    inputs = ops.graph_inputs(products.get_concrete_function(a))
    totals = ops.categorised(times, inputs, {"attention"}, "AdamWeightDecay")
    assert totals["matmul forward"] > 0 and totals["softmax"] > 0


def _case():
    variants = {
        "packed": {"step_s": [1.0, 1.2, 0.8], "cpu_s": [4.0, 4.0, 4.0], "op_ms_per_step": {
            **dict.fromkeys(ops.CATEGORIES, 0.0), "matmul forward": 300.0,
            "other": 100.0}},
        "padded": {"step_s": [2.0, 3.6, 1.2], "op_ms_per_step": {
            **dict.fromkeys(ops.CATEGORIES, 0.0), "matmul forward": 900.0,
            "other": 100.0}}}
    return {"variants": variants, "useful_flops": [100e9, 100e9, 100e9],
            "peak_gflops": {"4096x768x3072": 180.0, "2048x2048x2048": 200.0},
            "cpu_peak_gflops": {"4096x768x3072": 100.0, "2048x2048x2048": 90.0}, "cores": 2,
            "tokens": [400, 410, 420], "positions": [1024, 1056, 1088]}


def test_a_variants_summary_by_hand():
    packed = profile_report.variant_summary(_case(), "packed")
    padded = profile_report.variant_summary(_case(), "padded")
    assert packed["step_ms"] == pytest.approx(1000.0)
    # 100 GFLOP in 1 s against a 200 GFLOP/s peak (the best shape's).
    assert packed["mfu"] == pytest.approx(0.5)
    assert padded["mfu"] == pytest.approx(100 / 2.0 / 200)
    # From CPU time: 4 CPU seconds on 2 cores are 2 s with both, against 100 GFLOP/s.
    assert packed["cpu_mfu"] == pytest.approx(100 / 2.0 / 100)
    assert padded["cpu_mfu"] is None
    assert padded["ratio"] == pytest.approx((2.0, 1.5, 3.0))
    assert padded["shares"]["matmul forward"] == pytest.approx(0.9)
    table = profile_report.profile_table({"minilm/mrpc": _case()})
    assert "| time against packed, same batches (median, min-max) | 1 | 2.00x (1.50-3.00) |" \
        in table
    # Packed rows are the real tokens rounded up to 16: 400, 416, 432.
    assert "| real tokens / positions computed per batch (mean) | 410 / 416 | 410 / 1056 |" \
        in table


def test_transformers_side_has_times_and_no_op_profile():
    case = _case()
    case["variants"]["transformers"] = {"step_s": [3.0, 3.6, 2.4], "cpu_s": [6.0, 6.0, 6.0]}
    summary = profile_report.variant_summary(case, "transformers")
    assert summary["ratio"] == pytest.approx((3.0, 3.0, 3.0))
    assert summary["shares"] is None
    table = profile_report.profile_table({"minilm/mrpc_by_length": case})
    assert table.splitlines()[0].endswith("| MiniLM-L6 MRPC by length, transformers |")
    assert "| matmul forward | 75.0% | 90.0% | - |" in table
