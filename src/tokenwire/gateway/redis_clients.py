"""The gateway's Redis Cluster clients: how they are made and how they find the cluster.

The resume store and the limits both talk to the Cluster ``url`` names, and learned
the same things about redis-py's asyncio client:

- it reads the slot map only at its first command, from the seeds it was given
  (the URL's one node). A client first used after that node died can never find
  the cluster, so ``load_slot_map`` reads the map at startup, while the URL's
  node answers, and every node it lists becomes a seed;
- a command to a dead primary must fail at once, not after retries with
  backoff: ``Retry(NoBackoff(), 1)`` retries once, after re-reading the slot map
  (a promoted replica is then used), and the socket timeouts bound a hung node;
- after failovers the seeds may be left with dead nodes only, so
  ``refresh_slot_map`` adds every node known to the seeds before reading the map.

redis-py is imported when a client is made: a gateway without Redis never loads it.
"""

from __future__ import annotations

import contextlib
from typing import Any

__all__ = ["client_options", "cluster_client", "load_slot_map", "refresh_slot_map"]


def client_options(socket_timeout_s: float) -> dict[str, Any]:
    """The options of every gateway Redis client (one Redis or a Cluster)."""
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    return {
        "socket_timeout": socket_timeout_s,
        "socket_connect_timeout": min(socket_timeout_s, 2.0),
        # One quick retry: a stale pooled connection after a restart, or (on Cluster)
        # a dead primary, with the slot map re-read in between. Longer would hold up
        # the request waiting on it.
        "retry": Retry(NoBackoff(), 1),
        "protocol": 2,
    }


def cluster_client(url: str, *, socket_timeout_s: float = 5.0, **options: Any) -> Any:
    """A ``redis.asyncio.cluster.RedisCluster`` on ``url`` (any node's) with
    ``client_options``; ``options`` are passed on (``max_connections``: per node)."""
    from redis.asyncio.cluster import RedisCluster

    return RedisCluster.from_url(url, **client_options(socket_timeout_s), **options)


def _errors() -> tuple[type[BaseException], ...]:
    from redis.exceptions import RedisClusterException, RedisError

    return (RedisError, RedisClusterException, OSError)


async def load_slot_map(cluster: Any) -> bool:
    """Read ``cluster``'s slot map now (its first read, or a refresh it asked for):
    whether it has one. Never raises a Redis error: a cluster that does not answer
    is tried again by the next command."""
    with contextlib.suppress(*_errors()):
        await cluster.initialize()
    return bool(cluster.nodes_manager.slots_cache)


async def refresh_slot_map(cluster: Any) -> None:
    """Read ``cluster``'s slot map again now, asking every node it knows in turn, so
    that a seed list left with dead nodes after failovers (the URL's own node among
    them) still finds one that answers. Never raises a Redis error."""
    nodes = cluster.nodes_manager
    for name, node in list(nodes.nodes_cache.items()):
        nodes.startup_nodes.setdefault(name, node)
    with contextlib.suppress(*_errors()):
        await nodes.initialize()
