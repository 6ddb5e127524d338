"""TF-Hub / Kaggle BERT encoder SavedModels, read as data."""
