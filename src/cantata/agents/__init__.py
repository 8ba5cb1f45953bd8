"""cantata.agents."""

__all__: list[str] = []
