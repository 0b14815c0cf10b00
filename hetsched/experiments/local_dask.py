"""Dask's LocalCluster as sweeps and `reproduce` start and stop it."""

from __future__ import annotations

import logging


def close_quietly(cluster) -> None:
    """Stop a LocalCluster whose results are in. A nanny whose worker takes more than 4 s to exit (a loaded
    machine) kills it and logs a WARNING; the runs are over, so that is not news for the caller's output."""
    nanny = logging.getLogger("distributed.nanny")
    level = nanny.level
    nanny.setLevel(logging.ERROR)
    try:
        cluster.close()
    finally:
        nanny.setLevel(level)


def local_cluster(n_workers: int = 2):
    """Dask's LocalCluster as sweeps use it: single-thread worker processes. Loopback only: the scheduler, the
    workers and the dashboard bind 127.0.0.1 on free ports."""
    from dask.distributed import LocalCluster

    return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                        dashboard_address="127.0.0.1:0")
