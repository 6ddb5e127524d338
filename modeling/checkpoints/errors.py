"""What reading a checkpoint raises, whatever its format."""


class CheckpointMismatchError(ValueError):
    """The checkpoint does not hold what the model needs (a variable missing or with another
    shape, another activation); raised before any variable of the model changes."""


class CorruptCheckpointError(ValueError):
    """The checkpoint's files cannot be read (truncated, corrupted); nothing was loaded."""


class UnsupportedCheckpointError(ValueError):
    """The checkpoint holds variables or heads that no model of this project has."""


class NameTableError(ValueError):
    """A model's variables do not map one to one onto the original checkpoint names (a variable
    the name table lacks, two variables on one name): it is not one of this project's BERT models."""
