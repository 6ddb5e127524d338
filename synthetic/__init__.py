"""Synthetic corpora and task files for the demo and the tests (not used by the scripts)."""
