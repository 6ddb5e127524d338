"""What reading a checkpoint raises, whatever its format."""


class CheckpointMismatchError(ValueError):
    """The checkpoint does not hold what the model needs (a variable missing or with another
    shape, another activation); raised before any variable of the model changes."""


class CorruptCheckpointError(ValueError):
    """The checkpoint's files cannot be read (truncated, corrupted); nothing was loaded."""


class UnsupportedCheckpointError(ValueError):
    """The checkpoint holds variables or heads that no model of this project has."""
