"""What several test modules share: tiny models and fixtures, script runners, reference outputs.

A test module imports from here, never from another test module."""
