"""Helpers every layer may import: atomic output files and progress lines."""
