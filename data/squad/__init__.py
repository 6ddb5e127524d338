"""SQuAD v1.1/v2.0: examples, windowed features, answer selection, the official metrics."""
