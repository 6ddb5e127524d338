"""LiteRT exports against their SavedModels and transformers."""
