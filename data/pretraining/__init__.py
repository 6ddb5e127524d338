"""The pretraining data pipeline: corpus, documents to instances, masking, TFRecords, the input dataset."""
