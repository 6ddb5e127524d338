"""`BertEncoder`: the BERT Transformer encoder as a functional Keras model (paper section 3)."""
import keras
import tensorflow as tf

from modeling.config import BertConfig
from modeling.layers.attention import AttentionMask
from modeling.layers.embeddings import BertEmbeddings
from modeling.layers.initializers import weight_initializer
from modeling.layers import packing
from modeling.layers.packing import TokenPacking, TokenUnpacking
from modeling.layers.transformer_layer import TransformerLayer
from utils.encoder_inputs import ENCODER_INPUTS, INPUT_IDS, INPUT_MASK, SEGMENT_IDS


class Pooler(keras.layers.Layer):
    """tanh(dense(first token)): the sentence representation of the original `get_pooled_output`."""

    def __init__(self, hidden_size: int, initializer_range: float, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range
        self.dense = keras.layers.Dense(
            hidden_size, activation="tanh", name="dense", dtype=self.dtype_policy,
            kernel_initializer=weight_initializer(initializer_range))

    def build(self, input_shape):
        self.dense.build((None, self.hidden_size))

    def call(self, sequence_output):
        """Maps float [B, T, H] to float [B, H]."""
        return self.dense(sequence_output[:, 0])

    def compute_output_spec(self, sequence_output):
        return keras.KerasTensor((sequence_output.shape[0], self.hidden_size),
                                 dtype=self.compute_dtype)

    def get_config(self):
        return {**super().get_config(), "hidden_size": self.hidden_size,
                "initializer_range": self.initializer_range}


class BertEncoder(keras.Model):
    """BERT: embeddings, `num_hidden_layers` post-LN Transformer layers and the pooler.

    Inputs (dict): `input_ids`, `input_mask`, `segment_ids`, int32 [B, T], T <= max_position_embeddings.
    Outputs (dict): `sequence_output` [B, T, H] (last layer), `pooled_output` [B, H],
    `encoder_outputs` (list of the L layers' [B, T, H] outputs, the original's `all_encoder_layers`)
    and `embedding_output` [B, T, H]. Matches the original `BertModel`; leaves out its TPU one-hot
    embedding lookup, which computes the same numbers.

    `packed` (the default) computes the real tokens only (`input_mask` nonzero): every layer but
    attention's per-sequence products runs on their [R, H] matrix (`modeling.layers.packing`). The
    outputs at real tokens are the padded computation's, to float32 round-off; at padding they are
    zeros (the original computes values there that nothing real depends on). `packed=False`
    computes every position as the original does, for outputs that read padding (the original
    SQuAD span loss is a softmax over every position). Both have the same weights and paths.
    Packed, `pooled_output()` and `sequence_output_at()` run the last layer at the positions
    they read only (the classifiers' first token, the masked-LM head's masked positions).
    """

    def __init__(self, config: BertConfig, packed: bool = True, **kwargs):
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
                  for name in ENCODER_INPUTS}
        embeddings = BertEmbeddings(
            config.vocab_size, config.hidden_size, config.type_vocab_size,
            config.max_position_embeddings, config.hidden_dropout_prob, config.initializer_range,
            name="embeddings")
        attention_mask = AttentionMask(name="attention_mask")(inputs[INPUT_MASK])
        layers = [TransformerLayer(
            config.hidden_size, config.num_attention_heads, config.intermediate_size,
            config.hidden_act, config.hidden_dropout_prob, config.attention_probs_dropout_prob,
            config.initializer_range, name=f"layer_{index}")
            for index in range(config.num_hidden_layers)]
        stack = _packed_stack if packed else _padded_stack
        embedding_output, encoder_outputs = stack(inputs, embeddings, layers, attention_mask)
        pooled_output = Pooler(config.hidden_size, config.initializer_range, name="pooler")(
            encoder_outputs[-1])
        outputs = {"sequence_output": encoder_outputs[-1], "pooled_output": pooled_output,
                   "encoder_outputs": encoder_outputs, "embedding_output": embedding_output}
        super().__init__(inputs=inputs, outputs=outputs, **{"name": "bert", **kwargs})
        self.config = config
        self.packed = packed
        self.embeddings = embeddings

    def call(self, inputs, training=None, mask=None):
        """The functional graph; packed under XLA, once per bucket of rows (`layers.packing`)."""
        def forward():
            return super(BertEncoder, self).call(inputs, training=training, mask=mask)
        return packing.by_bucket(forward, inputs[INPUT_MASK]) if self.packed else forward()

    def sequence_output_at(self, inputs, positions, training=None):
        """`sequence_output` at some positions of each row only: float [B, Q, H] at `positions`
        int32 [B, Q] (zeros at padding positions, as `sequence_output` has).

        Packed, the last layer computes these positions only (its keys and values at every
        real token, which they attend to): what the pooler and the masked-LM head read, for
        5/6 less of the last layer's work. The same numbers as `call`'s to float32 round-off.
        """
        inputs = {name: tf.convert_to_tensor(inputs[name]) for name in ENCODER_INPUTS}
        positions = tf.cast(positions, tf.int32)
        if not self.packed:
            return tf.gather(self(inputs, training=training)["sequence_output"], positions,
                             batch_dims=1)
        input_mask = inputs[INPUT_MASK]

        def forward():
            layout = self.get_layer("packing")(input_mask)
            attention_mask = self.get_layer("attention_mask")(input_mask)
            *layers, last_layer = [self.get_layer(f"layer_{index}")
                                   for index in range(self.config.num_hidden_layers)]
            hidden_states = self.embeddings(inputs[INPUT_IDS], inputs[SEGMENT_IDS],
                                            layout["token_index"], training=training)
            for layer in layers:
                hidden_states = layer(hidden_states, attention_mask, layout, training=training)
            queries, real = packing.tokens_at(hidden_states, layout["token_index"], input_mask,
                                              positions)                      # [B, Q, H]
            outputs = last_layer(hidden_states, attention_mask, layout, queries=queries,
                                 training=training)
            # (`expand_dims`: LiteRT has no kernel for a new axis by indexing, `serving/litert.py`.)
            return tf.where(tf.expand_dims(real, -1), outputs, tf.zeros_like(outputs))
        return packing.by_bucket(forward, input_mask)

    def pooled_output(self, inputs, training=None):
        """`pooled_output` alone, float [B, H]: the last layer computed at the first position
        only (`sequence_output_at`)."""
        first = tf.zeros([tf.shape(inputs[INPUT_MASK])[0], 1], tf.int32)
        return self.pooler(self.sequence_output_at(inputs, first, training))

    @property
    def pooler(self) -> Pooler:
        """The pooler: float [B, T, H] sequence output (T >= 1) -> `pooled_output` [B, H]."""
        return self.get_layer("pooler")

    @property
    def word_embeddings(self) -> keras.Variable:
        """The [V, H] word-embedding table, shared with the masked-LM output projection."""
        return self.embeddings.word_embeddings

    def get_config(self):
        return {"config": self.config.to_dict(), "packed": self.packed, "name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(BertConfig.from_dict(config["config"]), packed=config.get("packed", True),
                   name=config.get("name", "bert"))


def encoder_of(model: keras.Model) -> BertEncoder:
    """The `BertEncoder` of any model of the project: the model itself for an encoder-only one,
    else its `encoder`."""
    return model if isinstance(model, BertEncoder) else model.encoder


def _padded_stack(inputs, embeddings, layers, attention_mask):
    """The embeddings and layers on every position: embedding_output, encoder_outputs [B, T, H]."""
    hidden_states = embeddings(inputs[INPUT_IDS], inputs[SEGMENT_IDS])
    embedding_output, encoder_outputs = hidden_states, []
    for layer in layers:
        hidden_states = layer(hidden_states, attention_mask)
        encoder_outputs.append(hidden_states)
    return embedding_output, encoder_outputs


def _packed_stack(inputs, embeddings, layers, attention_mask):
    """The embeddings and layers on the real tokens' [R, H] rows, unpacked to [B, T, H] outputs."""
    layout = TokenPacking(name="packing")(inputs[INPUT_MASK])
    token_index = layout["token_index"]
    hidden_states = embeddings(inputs[INPUT_IDS], inputs[SEGMENT_IDS], token_index)
    packed_outputs = [hidden_states]                                            # [R, H] each
    for layer in layers:
        hidden_states = layer(hidden_states, attention_mask, layout)
        packed_outputs.append(hidden_states)
    unpacking = TokenUnpacking(name="unpacking")
    embedding_output, *encoder_outputs = [
        unpacking(rows, token_index, inputs[INPUT_MASK]) for rows in packed_outputs]
    return embedding_output, encoder_outputs
