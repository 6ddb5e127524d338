"""Where a training step's time and memory go: the per-op profile, and the model FLOPs of the
real tokens (useful-token MFU)."""
