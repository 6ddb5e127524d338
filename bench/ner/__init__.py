"""CoNLL-2003 NER: document context in training, and whole documents tagged in windows."""
