"""KerasHub BERT presets, read and written as data."""
