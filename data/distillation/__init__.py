"""Distillation: a teacher's outputs on the rows a student learns from, computed once."""
