"""A Dask cluster as the engine of a sharded build (the only module that imports Dask).

``local:N`` starts a ``LocalCluster`` of N worker processes on this machine; anything else
is a scheduler's address (``tcp://host:8786``) whose workers see the same paths as this
machine (shared storage: the sessions roots and the index folder). The scheduler runs
each shard task on some worker, runs it again elsewhere when its worker dies, and retries
a task that failed up to :data:`~.shards.TASK_RETRIES` times.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ClusterError, FabricMemoryError, MissingExtraError, UsageError, clipped
from .shards import TASK_RETRIES, ShardResult, ShardTask, TaskFunction

if TYPE_CHECKING:
    from distributed import Client

CONNECT_SECONDS = 10.0
"""How long to wait for the scheduler to answer."""
LOCAL = "local:"


class DaskEngine:
    """Shard tasks on a Dask cluster, each result as it completes."""

    def __init__(self, client: Client, where: str) -> None:
        self._client = client
        self.where = where
        self.workers = len(client.scheduler_info().get("workers", {}))

    def run(self, function: TaskFunction, tasks: Sequence[ShardTask]) -> Iterator[ShardResult]:
        from distributed import as_completed

        futures = [self._client.submit(function, task, key=f"fabric-memory-{task.name}",
                                       retries=TASK_RETRIES, pure=False) for task in tasks]
        names = {future.key: task.name for future, task in zip(futures, tasks, strict=True)}
        try:
            for future in as_completed(futures):
                try:
                    yield future.result()
                except FabricMemoryError:
                    raise
                except Exception as exc:
                    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                    raise ClusterError(
                        f"{self.where}: shard {names.get(future.key, '?')} failed on the "
                        f"cluster after {TASK_RETRIES} retries ({type(exc).__name__}: "
                        f"{clipped(reason)}); the index is as the last build left it, run "
                        "the same reindex again") from None
        finally:
            self._client.cancel(futures)


def _local_workers(address: str) -> int | None:
    if not address.startswith(LOCAL):
        return None
    count = address.removeprefix(LOCAL)
    if not count.isdigit() or int(count) < 1:
        raise UsageError(f"--cluster {clipped(address)}: use local:N with N at least 1, or a "
                         "scheduler address such as tcp://127.0.0.1:8786")
    return int(count)


@contextlib.contextmanager
def dask_engine(address: str) -> Iterator[DaskEngine]:
    """A client of the cluster at ``address`` (``local:N``: a local cluster of N worker
    processes, closed on exit)."""
    local = _local_workers(address)
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise MissingExtraError(
            "--cluster needs Dask distributed; install it with "
            "pip install 'fabric-memory[cluster]'") from None
    cluster: Any = None
    try:
        if local is not None:
            cluster = LocalCluster(n_workers=local, threads_per_worker=1, processes=True,
                                   scheduler_port=0, dashboard_address=":0",
                                   silence_logs=logging.ERROR)
            client = Client(cluster)
        else:
            client = Client(address, timeout=CONNECT_SECONDS)
    except (OSError, TimeoutError, ValueError) as exc:
        if cluster is not None:
            cluster.close()
        raise ClusterError(
            f"--cluster {clipped(address)}: cannot reach the Dask scheduler ({exc}); start one "
            "with `dask scheduler` and pass its address (tcp://HOST:8786), or use local:N"
        ) from None
    try:
        yield DaskEngine(client, address)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
