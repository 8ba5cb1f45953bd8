"""cantata: one engine for AI agents, workflows and teams.

The layers are subpackages (see DESIGN.md): `cantata.core`, `cantata.stores`,
`cantata.runtime`, `cantata.models`, `cantata.tools`, `cantata.agents`,
`cantata.workflows`, `cantata.teams`, `cantata.declarative`, `cantata.serve`, `cantata.cli`.
"""

from .core import Message

__version__ = "0.1.0"

__all__ = ["Message", "__version__"]
