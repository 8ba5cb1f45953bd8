"""cantata.runtime.ray: the actor runtime's contract on a Ray cluster.

`RayRuntime` runs agents as virtual actors: many per host process, on a fixed pool of
host actors per node, placed by hashing their ids; messages cross as versioned JSON
envelopes. Needs the `ray` extra (``pip install 'cantata[ray]'``).
"""

from ...core import ConfigurationError

try:
    import ray as _ray  # noqa: F401
except ImportError as _exc:  # pragma: no cover - depends on the installation
    raise ConfigurationError("cantata.runtime.ray needs Ray: pip install 'cantata[ray]'") from _exc

from .errors import AgentUnavailable, RemoteHandlerError
from .reorder import ReorderBuffer
from .runtime import RayRuntime
from .wire import WIRE_VERSION

__all__ = [
    "WIRE_VERSION",
    "AgentUnavailable",
    "RayRuntime",
    "RemoteHandlerError",
    "ReorderBuffer",
]
