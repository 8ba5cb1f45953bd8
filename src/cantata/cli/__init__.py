"""cantata.cli: the `cantata` command (`cantata ask`, `cantata chat`)."""

from .app import app, main

__all__ = ["app", "main"]
