"""What a script that stopped on the user's mistake printed: one `error:` line, no traceback."""

TRACEBACK = "Traceback (most recent call last)"


def assert_user_error(stderr: str, cause: str) -> None:
    """The script printed one line `error: ...` whose message names `cause`, and no traceback."""
    assert TRACEBACK not in stderr, stderr[-3000:]
    errors = [number for number, line in enumerate(stderr.splitlines())
              if line.startswith("error: ")]
    assert len(errors) == 1, stderr[-3000:]
    message = "\n".join(stderr.splitlines()[errors[0]:])
    assert cause in message, stderr[-3000:]
