"""A padded batch's real tokens as one matrix of rows (packing), and back to [B, T] (unpacking).

The packed encoder runs its dense layers, LayerNorms, activations, dropout and residual adds on
the real tokens only; attention scatters them back into their rows for its per-sequence products,
the rows sorted by length and cut into groups, each padded to its own longest row
(`attention_layout`), so that the [T, T] products and the softmax, dropout and their gradients
on the scores cover little more than the real tokens' [length, length].

Shapes: B batch, T sequence length, R packed rows, W any width. Packed row r holds the token at
flat position `token_index[r]` = b * T + t of the batch, real tokens first, in row-major order
(they need not be a prefix of their row). The rows that round their count up hold B * T, one
past the batch: scattering sends them to a discarded row, gathering reads position B * T - 1 (a
finite value, never used).

Without XLA, R is the real token count rounded up to a multiple of `ROW_MULTIPLE`, a dynamic
dimension: one trace serves every batch. XLA needs static shapes: there, on GPUs and TPUs,
`by_bucket` runs the encoder as a `tf.switch_case` over `XLA_BUCKETS` row counts, the multiples of
ceil(B * T / XLA_BUCKETS), taking the smallest that holds the batch's real tokens; one
compilation per input shape holds every branch. Elsewhere the encoder runs on all B * T rows
without the switch (the padded computation's cost): under a gradient tape, where XLA would
recompile, at every call, a switch whose branches keep intermediates of different shapes; and
under XLA on a CPU, which `running.xla_choice` picks for forward passes whose batches prediction
has sorted by length (little padding) or that are too small to pay for compiling the switch's
other branches (on the project's tiny test models the switch made prediction 4x slower).
"""
import contextvars
from typing import Callable

import keras
import tensorflow as tf
# Private: TensorFlow offers no public way to tell, while tracing, that XLA will compile the graph
# or that a gradient tape records it. tests/modeling/layers/test_packing.py fails if these go away.
from tensorflow.python.eager import record
from tensorflow.python.ops import control_flow_util

# How many row counts, the multiples of ceil(B * T / XLA_BUCKETS), the encoder compiles under XLA.
XLA_BUCKETS = 4

# Without XLA, the real tokens' row count is rounded up to a multiple of this. The CPU kernels
# compute the elements past a tensor's last full SIMD vector (16 floats with AVX-512) with scalar
# code, where some functions (rsqrt) round differently: a token's numbers would otherwise depend
# on which rows share its batch.
ROW_MULTIPLE = 16

# Attention runs on the batch's rows sorted by their length and cut into this many groups, each
# padded to its own longest row (`attention_layout`): on random batches of GLUE's training sets,
# 1.25x (MRPC) and 2.0x (SST-2) the [T, T] scores of the real tokens, against 2.2x and 6.3x for the
# batch padded to its longest row.
ATTENTION_GROUPS = 4

# The bucket of the `by_bucket` branch being traced, whose row count `pack` gives.
_xla_bucket = contextvars.ContextVar("xla_bucket", default=None)


def compiled_with_xla() -> bool:
    """Whether the graph being traced will be compiled by XLA (`jit_compile=True`)."""
    graph = tf.compat.v1.get_default_graph()
    return tf.inside_function() and control_flow_util.GraphOrParentsInXlaContext(graph)


def bucket_sizes(flat_size: int) -> list[int]:
    """The row counts the encoder is compiled for under XLA, for B * T = `flat_size`."""
    step = max(-(-flat_size // XLA_BUCKETS), 1)
    return [min((k + 1) * step, flat_size) for k in range(XLA_BUCKETS)]


def _bucket_step(flat_size: tf.Tensor) -> tf.Tensor:
    """int32 scalar: ceil(B * T / XLA_BUCKETS), at least 1."""
    return tf.maximum((flat_size + XLA_BUCKETS - 1) // XLA_BUCKETS, 1)


def _real_tokens(input_mask: tf.Tensor) -> tf.Tensor:
    """bool [B*T]: which positions hold real tokens."""
    return tf.reshape(tf.not_equal(input_mask, 0), [-1])


def buckets_on_this_device() -> bool:
    """Whether XLA's forward passes switch over row counts here: on GPUs and TPUs."""
    return bool(tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"))


def by_bucket(fn: Callable[[], object], input_mask: tf.Tensor):
    """Runs `fn`, the packed encoder's forward pass on the batch of `input_mask` int [B, T]; under
    XLA on a GPU or TPU without a gradient tape, as a switch over the bucket that holds its real
    tokens."""
    if (not compiled_with_xla() or record.could_possibly_record()
            or not buckets_on_this_device()):
        return fn()
    count = tf.reduce_sum(tf.cast(_real_tokens(input_mask), tf.int32))
    step = _bucket_step(tf.size(input_mask))
    bucket = tf.clip_by_value((count + step - 1) // step - 1, 0, XLA_BUCKETS - 1)

    def branch(k: int) -> Callable[[], object]:
        def run():
            token = _xla_bucket.set(k)
            try:
                return fn()
            finally:
                _xla_bucket.reset(token)
        return run
    return tf.switch_case(bucket, [branch(k) for k in range(XLA_BUCKETS)])


def pack(input_mask: tf.Tensor) -> tf.Tensor:
    """The packing of a batch: `token_index` int32 [R] (see the module docstring).

    Args:
        input_mask: int [B, T], nonzero for real tokens.
    """
    real = _real_tokens(input_mask)                                            # [B*T]
    flat_size = tf.size(input_mask)
    if not compiled_with_xla():
        token_index = tf.cast(tf.where(real)[:, 0], tf.int32)
        extra_rows = -tf.size(token_index) % ROW_MULTIPLE
        return tf.pad(token_index, [[0, extra_rows]], constant_values=flat_size)
    # Under XLA: every position's row, real tokens first (each written to its row by a scatter
    # whose other writes land past the end and are cut), then B * T.
    count = tf.reduce_sum(tf.cast(real, tf.int32))
    row = tf.where(real, tf.cumsum(tf.cast(real, tf.int32)) - 1, flat_size)
    positions = tf.range(flat_size, dtype=tf.int32)
    token_index = tf.scatter_nd(row[:, tf.newaxis], positions + 1, [flat_size + 1])[:-1] - 1
    token_index = tf.where(positions < count, token_index, flat_size)
    bucket = _xla_bucket.get()
    if bucket is None:
        return token_index
    return token_index[:tf.minimum((bucket + 1) * _bucket_step(flat_size), flat_size)]


def gather_tokens(values: tf.Tensor, token_index: tf.Tensor) -> tf.Tensor:
    """Packs: values [B, T, ...] -> [R, ...] at `token_index` int32 [R]."""
    shape = tf.shape(values)
    flat = tf.reshape(values, tf.concat([[shape[0] * shape[1]], shape[2:]], 0))  # [B*T, ...]
    if not flat.dtype.is_floating:
        return tf.gather(flat, tf.minimum(token_index, shape[0] * shape[1] - 1))
    return gather_rows(flat, token_index)


def scatter_tokens(packed: tf.Tensor, token_index: tf.Tensor, batch: tf.Tensor,
                   length: tf.Tensor) -> tf.Tensor:
    """Unpacks: packed [R, W] -> [B, T, W], zeros where no packed row lands."""
    flat = scatter_rows(packed, token_index, batch * length)                   # [B*T, W]
    return tf.reshape(flat, [batch, length, packed.shape[-1] or tf.shape(packed)[-1]])


def tokens_at(packed: tf.Tensor, token_index: tf.Tensor, input_mask: tf.Tensor,
              positions: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """The packed rows [R, W] of the batch of `input_mask` int [B, T] at `positions` int32
    [B, Q] of each row: [B, Q, W] (zeros at padding), and bool [B, Q], which are real tokens."""
    batch, length = tf.shape(input_mask)[0], tf.shape(input_mask)[1]
    flat = tf.reshape(positions + tf.range(batch)[:, tf.newaxis] * length, [-1])  # [B*Q]
    values = gather_rows(scatter_rows(packed, token_index, batch * length), flat)  # [B*Q, W]
    real = tf.gather(_real_tokens(input_mask), flat)
    shape = tf.shape(positions)
    return (tf.reshape(values, [shape[0], shape[1], packed.shape[-1]]),
            tf.reshape(real, shape))


# Gathering and scattering rows are each other's transposes, and so each other's gradients. Their
# own gradients in TensorFlow cost more: a gather's sums its rows with UnsortedSegmentSum, and the
# slice that drops the scatter's extra row has a StridedSliceGrad that copies [B*T + 1, W]; the two
# took 7% of a MiniLM training step on MRPC's batches.

@tf.custom_gradient
def gather_rows(flat: tf.Tensor, token_index: tf.Tensor) -> tf.Tensor:
    """flat [P, W] -> its rows at `token_index` [R]; an index P (past the end) reads row P - 1."""
    size = tf.shape(flat)[0]
    rows = tf.gather(flat, tf.minimum(token_index, size - 1))

    def gradient(d_rows):
        return scatter_rows(d_rows, token_index, size), None
    return rows, gradient


@tf.custom_gradient
def scatter_rows(rows: tf.Tensor, token_index: tf.Tensor, size: tf.Tensor) -> tf.Tensor:
    """rows [R, W] -> [size, W] with row r at `token_index[r]`, zeros elsewhere; rows whose index
    is `size` (past the end) are dropped."""
    width = rows.shape[1:]
    shape = ([size + 1, *width] if width.is_fully_defined() else
             tf.concat([[size + 1], tf.shape(rows)[1:]], 0))
    flat = tf.scatter_nd(token_index[:, tf.newaxis], rows, shape)[:-1]

    def gradient(d_flat):
        kept = tf.reshape(token_index < size, [-1] + [1] * (rows.shape.rank - 1))
        d_rows = gather_rows(d_flat, token_index)
        return tf.where(kept, d_rows, tf.zeros_like(d_rows)), None, None
    return flat, gradient


def attention_layout(input_mask: tf.Tensor, token_index: tf.Tensor) -> dict:
    """Where attention places the packed rows: the batch's rows in `ATTENTION_GROUPS` groups.

    The rows are sorted by extent (one past their last real token) and cut into groups of equal
    counts, each as long as its longest row; an empty group holds one slot (LiteRT's XNNPack
    cannot reshape tensors of size zero). Under XLA, whose shapes are static, the batch is the
    first group as it is, and the others hold one slot.

    Args:
        input_mask: int [B, T], nonzero for real tokens.
        token_index: int32 [R], the batch's packing (`pack`).

    Returns:
        A dict: `group_sizes` and `group_lengths` int32 [G], each group's rows and length, laid
        out one after the other in `slot_count` = S = sum(`group_slots`) slots, `group_slots`
        int32 [G] = sizes * lengths; `slot_index` int32 [R], each packed row's slot (S for the
        rows that round the count up); `slot_mask` float32 [S], the additive attention mask of
        each slot (0 for a real token, -10000 else). And per group, lists that every layer
        shares: `group_shapes`, [rows, length] as int32 scalars, and `group_masks`, the group's
        part of `slot_mask` as float32 [rows, 1, 1, length].
    """
    batch, length = tf.shape(input_mask)[0], tf.shape(input_mask)[1]
    if compiled_with_xla():
        order = tf.range(batch)
        bounds = tf.concat([[0], tf.fill([ATTENTION_GROUPS], batch)], 0)               # [G + 1]
        lengths = tf.concat([[length], tf.zeros([ATTENTION_GROUPS - 1], tf.int32)], 0)  # [G]
    else:
        positions = tf.range(1, length + 1)
        extent = tf.reduce_max(tf.where(tf.not_equal(input_mask, 0), positions, 0), axis=1)
        order = tf.argsort(extent, stable=True)                                    # [B]
        bounds = tf.range(ATTENTION_GROUPS + 1) * batch // ATTENTION_GROUPS        # [G + 1]
        # A group's longest row is its last; the leading 0 serves empty groups and batches.
        sorted_extent = tf.concat([[0], tf.gather(extent, order)], 0)              # [B + 1]
        lengths = tf.where(bounds[1:] > bounds[:-1], tf.gather(sorted_extent, bounds[1:]), 0)
    sizes = tf.maximum(bounds[1:] - bounds[:-1], 1)                                # [G]
    lengths = tf.maximum(lengths, 1)                                               # [G]
    group_slots = sizes * lengths                                                  # [G]
    offsets = tf.cumsum(group_slots, exclusive=True)                               # [G]
    # (Scatter and compare, not invert_permutation and searchsorted: LiteRT has kernels for these.)
    rank = tf.scatter_nd(order[:, tf.newaxis], tf.range(batch), [batch])           # [B]
    group = tf.reduce_sum(tf.cast(bounds[tf.newaxis, 1:] <= rank[:, tf.newaxis], tf.int32),
                          axis=1)                                                  # [B]
    row_start = (tf.gather(offsets, group)
                 + (rank - tf.gather(bounds, group)) * tf.gather(lengths, group))  # [B]
    slot_count = tf.reduce_sum(group_slots)
    token = tf.minimum(token_index, batch * length - 1)
    slot_index = tf.where(token_index < batch * length,
                          tf.gather(row_start, token // length) + token % length, slot_count)
    real = tf.scatter_nd(slot_index[:, tf.newaxis], tf.ones_like(slot_index), [slot_count + 1])
    slot_mask = (1.0 - tf.cast(real[:-1], tf.float32)) * -10000.0                  # [S]
    # Each layer's attention reshapes by these: computed once here, they keep the step's graph
    # (traced and instantiated on a training run's first step) a few hundred ops smaller a layer.
    # Rows and lengths stay separate scalars: where the batch size is static, so are the rows.
    shapes = [*zip(tf.unstack(sizes, num=ATTENTION_GROUPS),
                   tf.unstack(lengths, num=ATTENTION_GROUPS))]                     # G x (2 [])
    masks = [tf.reshape(part, [rows, 1, 1, group_length]) for part, (rows, group_length) in
             zip(tf.split(slot_mask, group_slots, num=ATTENTION_GROUPS), shapes)]
    return {"group_sizes": sizes, "group_lengths": lengths, "group_slots": group_slots,
            "slot_count": slot_count, "slot_index": slot_index, "slot_mask": slot_mask,
            "group_shapes": [list(shape) for shape in shapes], "group_masks": masks}


class TokenPacking(keras.layers.Layer):
    """Layer form of `pack` and `attention_layout`: input_mask [B, T] -> the layout's dict with
    `token_index` [R] added."""

    def call(self, input_mask):
        token_index = pack(input_mask)
        return {"token_index": token_index, **attention_layout(input_mask, token_index)}

    def compute_output_spec(self, input_mask):
        """The layout's structure, without tracing `call` (a functional model's build)."""
        def spec(shape, dtype="int32"):
            return keras.KerasTensor(shape, dtype=dtype)
        groups = (ATTENTION_GROUPS,)
        return {"token_index": spec((None,)), "group_sizes": spec(groups),
                "group_lengths": spec(groups), "group_slots": spec(groups),
                "slot_count": spec(()), "slot_index": spec((None,)),
                "slot_mask": spec((None,), "float32"),
                "group_shapes": [[spec(()), spec(())] for _ in range(ATTENTION_GROUPS)],
                "group_masks": [spec((None, 1, 1, None), "float32")
                                for _ in range(ATTENTION_GROUPS)]}


class TokenUnpacking(keras.layers.Layer):
    """Layer form of `scatter_tokens`: packed [R, W] -> [B, T, W] in the batch of `input_mask`."""

    def call(self, packed, token_index, input_mask):
        shape = tf.shape(input_mask)
        return scatter_tokens(packed, token_index, shape[0], shape[1])

    def compute_output_spec(self, packed, token_index, input_mask):
        return keras.KerasTensor((input_mask.shape[0], input_mask.shape[1], packed.shape[-1]),
                                 dtype=packed.dtype)
