"""SavedModel serving with in-graph tokenization, above `data/` and `modeling/`."""
