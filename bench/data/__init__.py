"""Pretraining data: create_pretraining_data.py against the original algorithm, the TFRecord
writer's pieces, and that original algorithm itself."""
