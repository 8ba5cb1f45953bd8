"""cantata.declarative."""

__all__: list[str] = []
