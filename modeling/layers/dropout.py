"""`Dropout`: Keras' inverted dropout, drawing 16 random bits an element where Keras draws 32."""
import keras
import tensorflow as tf

# The random integers a kept element's 16 bits are compared with.
_LEVELS = 1 << 16


class Dropout(keras.layers.Dropout):
    """`keras.layers.Dropout` (same arguments, seed generator and variables), whose mask keeps an
    element where 16 random bits are at least round(rate * 65536): half the random numbers of
    Keras' comparison of a float32 uniform with `rate`, which on CPU took as long as the rest of
    the dropout (the mask on the [B, N, T, T] attention probabilities most). The kept elements
    are scaled by 1 / keep probability, that of the 16-bit threshold (rate 0.1: 0.1000061 of the
    elements dropped), so that the expected output is the input, as Keras'.
    """

    def call(self, inputs, training=False):
        if self._as_keras(training):
            return super().call(inputs, training=training)
        return drop(inputs, self.rate, self.seed_generator.next())

    def drop_each(self, inputs: list[tf.Tensor], training) -> list[tf.Tensor]:
        """`call` on each of `inputs`, their masks drawn at once from one seed: a few dozen ops
        fewer a tensor in graphs that drop several (attention's groups of rows)."""
        if self._as_keras(training):
            return [self.call(x, training=training) for x in inputs]
        sizes = tf.stack([tf.size(x) for x in inputs])
        bits = _random_bits(tf.reduce_sum(sizes), self.seed_generator.next())
        return [_apply(x, tf.reshape(part, tf.shape(x)), self.rate)
                for x, part in zip(inputs, tf.split(bits, sizes, num=len(inputs)))]

    def _as_keras(self, training) -> bool:
        """Whether Keras' own dropout serves: not training (the input as it is), rate 0, or a
        noise shape (masks broadcast over some axes)."""
        return not training or self.rate == 0 or self.noise_shape is not None


def drop(inputs: tf.Tensor, rate: float, seed: tf.Tensor) -> tf.Tensor:
    """inputs with elements dropped at `rate` and the others scaled, from the stateless `seed`
    (a [2] integer tensor)."""
    bits = _random_bits(tf.size(inputs), seed)
    return _apply(inputs, tf.reshape(bits, tf.shape(inputs)), rate)


def _random_bits(size: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
    """uint16 [size]: random bits from the stateless `seed` (a [2] integer tensor)."""
    seed = tf.cast(tf.math.floormod(seed, tf.int32.max - 1), tf.int32)  # as Keras' seeds
    words = tf.random.stateless_uniform([(size + 1) // 2], seed, minval=None, maxval=None,
                                        dtype=tf.uint32)
    return tf.reshape(tf.bitcast(words, tf.uint16), [-1])[:size]       # two per word


def _apply(inputs: tf.Tensor, bits: tf.Tensor, rate: float) -> tf.Tensor:
    """inputs where `bits` (uint16, inputs' shape) keep them, scaled; zeros elsewhere."""
    threshold = round(rate * _LEVELS)
    if threshold >= _LEVELS:
        return tf.zeros_like(inputs)
    scale = tf.cast(_LEVELS / (_LEVELS - threshold), inputs.dtype)
    keep = bits >= threshold

    # The gradient written out, the same values as autodiff's: the select's gradient is taken
    # for both of its branches and reduced for broadcasting, a dozen ops a dropout in the
    # backward graph where this takes three.
    @tf.custom_gradient
    def masked(x):
        def gradient(dy):
            return tf.where(keep, dy * scale, tf.zeros_like(dy))
        return tf.where(keep, x * scale, tf.zeros_like(x)), gradient
    return masked(inputs)
