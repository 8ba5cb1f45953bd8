"""The server's metrics, in Prometheus's text format at ``GET /metrics``.

Each app has a registry of its own (not prometheus-client's global one), so two apps in
one process count apart. With several worker processes each answers for itself: scrape
each, or sum them behind the proxy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import Response

__all__ = ["METRICS_PATH", "ServeMetrics"]

METRICS_PATH = "/metrics"
"""Where the app answers with its metrics."""


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

    def __post_init__(self) -> None:
        r = self.registry
        self.running = Gauge(
            "cantata_serve_running_requests", "Requests running model work now.", registry=r
        )
        self.queued = Gauge(
            "cantata_serve_queued_requests", "Requests waiting for a slot now.", registry=r
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

    async def endpoint(self, request: Request) -> Response:
        """``GET /metrics``."""
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)
