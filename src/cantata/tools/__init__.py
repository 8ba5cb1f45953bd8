"""cantata.tools."""

__all__: list[str] = []
