"""SWAG: the multiple-choice examples, their four-choice features, accuracy and predictions."""
