"""cantata.teams."""

__all__: list[str] = []
