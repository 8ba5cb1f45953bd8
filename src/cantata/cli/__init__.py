"""cantata.cli."""

__all__: list[str] = []
