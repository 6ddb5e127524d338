"""CoNLL-2003 named-entity recognition: the file reader, word-piece features, conlleval metrics."""
