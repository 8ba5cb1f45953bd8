"""Local subscribers of a `RayRuntime`: callbacks that run in the process that added them.

An event published anywhere on the cluster for a local subscriber, or a direct request to
its agent id, is queued by this process's directory actor (placed on this process's
node). One task here takes what is queued (a long poll, `_TAKE_WAIT` seconds at most per
call) and calls each callback in turn, answering requests through the router. The
directory actor serves local subscribers only: agents' messages never pass through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from typing import Any

from ray.exceptions import ActorDiedError, RayActorError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

import ray

from ...core import ConfigurationError, loads, new_id
from ..ids import AgentId
from ..protocol import LocalCallback
from . import wire
from .direct import died
from .errors import AgentUnavailable
from .host import directory_class
from .router import Router
from .waits import await_ref

__all__ = ["LocalSubscribers"]

_TAKE_WAIT = 5.0  # seconds the directory holds a local subscribers' poll with nothing new
_REPLACE_WAIT = 30.0  # seconds for Ray to free a dead directory's name (a bound, not a measure)
_REPLACE_POLL = 0.1  # seconds between asks for that name
_CALL_WAIT = 60.0  # seconds at most for the directory to take a new subscriber (a bound)
_log = logging.getLogger("cantata.runtime.ray")


class LocalSubscribers:
    """This process's callbacks, by key, and the directory actor that queues for them."""

    def __init__(self, name: str, namespace: str, config: dict[str, Any], origin: str) -> None:
        self._name, self._namespace, self._config, self._origin = name, namespace, config, origin
        self._callbacks: dict[str, LocalCallback] = {}
        self._poller: asyncio.Task[None] | None = None
        self._replacing = asyncio.Lock()
        self.directory: Any = None

    def new_directory(self) -> Any:
        """This process's directory actor (the one of this pool's name, if it exists)."""
        self.directory = self._directory_by_name()
        return self.directory

    def _directory_by_name(self) -> Any:
        """The pool's directory actor, started if Ray knows none of its name (blocking)."""
        return (
            directory_class()
            .options(
                name=f"{self._name}/directory",
                namespace=self._namespace,
                get_if_exists=True,
                num_cpus=0,
                max_concurrency=1000,
                # on this process's node: it serves this process's local subscribers, so it
                # should not die with another node (soft placement let Ray put it anywhere)
                scheduling_strategy=NodeAffinitySchedulingStrategy(
                    ray.get_runtime_context().get_node_id(), soft=False
                ),
            )
            .remote(self._name, self._config)
        )

    async def open(self, router: Router, callback: LocalCallback) -> str:
        """A new subscriber's key, its callback called from now on by `router`'s polls."""
        key = new_id()
        directory = self.directory
        try:
            await self._open_local(key)
        except RayActorError as exc:
            # Its node or its process died: a new one. Ray may say "unavailable" before the
            # news of a death reaches it, so an unavailable one is asked whether it died.
            if isinstance(exc, ActorDiedError) or await died(directory):
                await self._replace(router, directory)
            else:  # alive but out of reach: the same one, over a new stream
                router.use_directory(directory)
            try:
                await self._open_local(key)
            except RayActorError as again:
                raise AgentUnavailable(
                    f"RayRuntime {self._name!r}: the directory actor did not take the local "
                    f"subscriber: {again}"
                ) from None
        self._callbacks[key] = callback
        if self._poller is None or self._poller.done():
            self._poller = asyncio.get_running_loop().create_task(self._poll(router))
        return key

    async def _open_local(self, key: str) -> None:
        ref = self.directory.open_local.remote(self._origin, key)
        try:
            await asyncio.wait_for(await_ref(ref), _CALL_WAIT)
        except TimeoutError:
            raise AgentUnavailable(
                f"RayRuntime {self._name!r}: the directory actor did not answer in "
                f"{_CALL_WAIT:.0f} s"
            ) from None

    async def _replace(self, router: Router, dead: Any) -> None:
        """Put a new directory actor in the place of `dead`, once however many subscribers
        found it dead at once; the poller of the dead one gives way to a new one.

        Ray frees a dead actor's name only once it has recorded the death, and until then
        asking for the name (`get_if_exists`) hands back the dead actor: seen in CI, where
        the directory's process died as it started and the replacement was that same actor.
        So it asks again until the answer is another actor, for `_REPLACE_WAIT` seconds (a
        bound checked between asks, each a short call to Ray's control store).
        """
        async with self._replacing:
            if self.directory != dead:  # another subscriber replaced it meanwhile
                return
            _log.warning(
                "RayRuntime %r: the directory actor is gone; starting a new one", self._name
            )
            with contextlib.suppress(ValueError):  # a handle of an earlier Ray session
                ray.kill(dead, no_restart=True)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + _REPLACE_WAIT
            while (fresh := await asyncio.to_thread(self._directory_by_name)) == dead:
                if loop.time() >= deadline:
                    raise AgentUnavailable(
                        f"RayRuntime {self._name!r}: Ray still names the dead directory "
                        f"actor after {_REPLACE_WAIT:.0f} s; no local subscriber can be added"
                    )
                await asyncio.sleep(_REPLACE_POLL)
            self.directory = fresh
            router.use_directory(fresh)
            if self._poller is not None:  # it polls the dead one: `open` starts another
                self._poller.cancel()
                self._poller = None

    async def close(self, key: str) -> None:
        """Stop calling `key`'s callback; the directory refuses requests to it."""
        if self._callbacks.pop(key, None) is not None and self.directory is not None:
            try:
                await await_ref(self.directory.close_local.remote(key))
            except RayActorError:  # the directory is gone, and every local subscriber with it
                _log.debug("local subscriber %s: the directory actor is gone", key)

    def stop(self) -> None:
        """Stop polling and forget every callback (the runtime closes)."""
        if self._poller is not None:
            self._poller.cancel()
            self._poller = None
        self._callbacks.clear()

    async def _poll(self, router: Router) -> None:
        """Take what waits for this process's local subscribers and call them, in order."""
        directory = self.directory
        while self.directory is directory:
            try:
                items = await router.take(_TAKE_WAIT)
            except (RayActorError, AgentUnavailable):
                _log.warning("local subscribers: the directory actor is gone; they stop")
                return
            for item in items:
                await self._call(router, item)

    async def _call(self, router: Router, item: dict[str, Any]) -> None:
        env = item.get("ask") or item["event"]
        key = AgentId.parse(str(env["recipient"])).key
        callback = self._callbacks.get(key)
        try:
            if callback is None:
                raise ConfigurationError(f"local subscriber {env['recipient']} was removed")
            result = callback(loads(env["msg"]))
            if inspect.isawaitable(result):
                result = await result
            reply = wire.ok(result)
        except Exception as exc:
            if "ask" not in item:
                _log.exception("local subscriber %s failed on event %s", key, env["id"])
                return
            reply = wire.failed(exc)
        if "ask" in item:
            router.answer(str(env["id"]), reply)
