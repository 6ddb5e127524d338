"""Sentence (pair) classification data: GLUE and XNLI tasks, their features, metrics and submissions."""
