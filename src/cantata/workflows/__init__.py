"""cantata.workflows."""

__all__: list[str] = []
