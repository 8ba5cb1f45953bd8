"""cantata.runtime."""

__all__: list[str] = []
