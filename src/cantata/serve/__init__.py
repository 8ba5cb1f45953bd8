"""cantata.serve."""

__all__: list[str] = []
