"""A two-node Ray cluster on 127.0.0.1 for the Ray tests, started once per session.

Ports are free ones (6379 is Redis's on these machines), the dashboard is off, object
stores are small, and the cluster is shut down at the end. Without Ray installed the
tests skip, except under CI, where they fail.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from typing import Any

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
# Ray would otherwise resolve 127.0.0.1 to the machine's outward address; the tests stay
# on the loopback interface (read when Ray is imported, so set first).
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

try:
    from ray.cluster_utils import Cluster

    import ray
except ImportError:  # pragma: no cover - depends on the installation
    if IN_CI:
        raise
    pytest.skip("ray is not installed (pip install 'cantata[ray]')", allow_module_level=True)

if HERE not in sys.path:
    sys.path.insert(0, HERE)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _node_args(**extra: Any) -> dict[str, Any]:
    return {
        "node_ip_address": "127.0.0.1",
        "num_cpus": 4,
        "object_store_memory": 80 * 1024 * 1024,
        "include_dashboard": False,
        "dashboard_agent_listen_port": free_port(),
        "runtime_env_agent_port": free_port(),
        "metrics_agent_port": free_port(),
        "metrics_export_port": free_port(),
        **extra,
    }


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    """Head and one worker node; the driver is connected to it."""
    # A lost node is noticed within about 5 s; a node merely slow on a busy machine (a
    # new one starting its workers on two shared cores) is not taken for lost.
    system = {"health_check_period_ms": 500, "health_check_failure_threshold": 10}
    made = Cluster(
        initialize_head=True,
        head_node_args=_node_args(
            gcs_server_port=free_port(), _system_config=system, resources={"head": 1}
        ),
    )
    made.add_node(**_node_args(resources={"worker": 1}))
    path = os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    ray.init(
        address=made.address,
        namespace="cantata-tests",
        runtime_env={"env_vars": {"PYTHONPATH": path}},
        log_to_driver=False,
    )
    try:
        yield made
    finally:
        ray.shutdown()
        made.shutdown()
