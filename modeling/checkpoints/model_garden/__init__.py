"""Model Garden's TF2-era object-based BERT checkpoints."""
