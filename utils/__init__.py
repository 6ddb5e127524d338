"""Helpers every layer may import: atomic output files, progress lines, JSON files, and the
scripts' entry point (stop signals, user errors, a quiet TensorFlow start)."""
