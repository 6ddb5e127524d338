"""Google's original name-based TF1 checkpoints (`bert_model.ckpt`)."""
