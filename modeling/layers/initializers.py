"""The original's weight initialiser."""
import keras


def weight_initializer(initializer_range: float) -> keras.initializers.Initializer:
    """Truncated normal (cut at two standard deviations), stddev `initializer_range`."""
    return keras.initializers.TruncatedNormal(stddev=initializer_range)
