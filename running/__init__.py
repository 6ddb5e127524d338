"""Running a model over examples: batches cut to their own longest sequence, batched prediction
in input order, and the XLA choice; shared by `training` and `tasks`. Imports `modeling` and
`utils`."""
