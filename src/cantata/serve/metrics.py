"""The server's metrics, in Prometheus's text format at ``GET /metrics``.

Each app has a registry of its own (not prometheus-client's global one), so two apps in
one process count apart. Worker processes behind one socket (`serve_workers`) cannot be
scraped one by one, so there the metrics are the whole server's: prometheus-client's
multiprocess mode, each worker writing its values to files in the directory that
``PROMETHEUS_MULTIPROC_DIR`` names (the parent makes one), and every worker's
``/metrics`` reading them all: counters and histograms summed over the workers that ever
ran, gauges over the live ones.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.multiprocess import MultiProcessCollector
from starlette.requests import Request
from starlette.responses import Response

__all__ = ["METRICS_PATH", "MULTIPROCESS_ENV", "ServeMetrics", "multiprocess_dir"]

METRICS_PATH = "/metrics"
"""Where the app answers with its metrics."""
MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"
"""prometheus-client's variable naming the directory its multiprocess mode writes to (read
when prometheus-client is imported: set it before a worker process starts)."""


def multiprocess_dir() -> str | None:
    """The multiprocess mode's directory, when this process runs in that mode."""
    return os.environ.get(MULTIPROCESS_ENV) or None


@dataclass(slots=True)
class ServeMetrics:
    """The gauges and counters of one app."""

    registry: CollectorRegistry = field(
        default_factory=lambda: CollectorRegistry(auto_describe=True)
    )
    running: Gauge = field(init=False)
    queued: Gauge = field(init=False)
    admitted: Counter = field(init=False)
    rejected: Counter = field(init=False)
    queue_wait: Histogram = field(init=False)
    stalled: Counter = field(init=False)
    stopped: Counter = field(init=False)
    abandoned: Counter = field(init=False)

    def __post_init__(self) -> None:
        r = self.registry
        self.running = Gauge(
            "cantata_serve_running_requests",
            "Requests running model work now.",
            registry=r,
            multiprocess_mode="livesum",
        )
        self.queued = Gauge(
            "cantata_serve_queued_requests",
            "Requests waiting for a slot now.",
            registry=r,
            multiprocess_mode="livesum",
        )
        self.admitted = Counter(
            "cantata_serve_admitted_requests", "Requests given a slot.", registry=r
        )
        self.rejected = Counter(
            "cantata_serve_rejected_requests",
            "Requests refused with 429 (queue_full, queue_timeout) or 503 (stopping).",
            ["reason"],
            registry=r,
        )
        self.queue_wait = Histogram(
            "cantata_serve_queue_wait_seconds",
            "Seconds an admitted request waited for its slot.",
            buckets=(0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 120),
            registry=r,
        )
        self.stalled = Counter(
            "cantata_serve_stalled_streams",
            "Streams ended because the client did not read within the write timeout.",
            registry=r,
        )
        self.stopped = Counter(
            "cantata_serve_stopped_requests",
            "Requests ended with a terminal error event because the server was stopping.",
            registry=r,
        )
        self.abandoned = Counter(
            "cantata_serve_abandoned_runs",
            "Waiting runs released unanswered: past abandon_after (timeout), or the oldest "
            "beyond the waiting runs kept (limit).",
            ["reason"],
            registry=r,
        )

    async def endpoint(self, request: Request) -> Response:
        """``GET /metrics``: this app's, or in multiprocess mode every worker's."""
        path = multiprocess_dir()
        if path is None:
            return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)
        everyone = CollectorRegistry()
        MultiProcessCollector(everyone, path=path)  # type: ignore[no-untyped-call]
        return Response(generate_latest(everyone), media_type=CONTENT_TYPE_LATEST)
