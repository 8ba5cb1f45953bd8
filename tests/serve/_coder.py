"""What the local-code tests serve: an agent whose model writes Python that runs here."""

from __future__ import annotations

from cantata.models import ScriptedChatClient
from cantata.teams import coder_agent
from cantata.tools import LocalCodeExecutor

coder = coder_agent(ScriptedChatClient(["done"]), LocalCodeExecutor(timeout=5))
