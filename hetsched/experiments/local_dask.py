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


def worker_environ() -> dict:
    """The environment Dask's nannies give their workers, without `MALLOC_TRIM_THRESHOLD_`. Dask sets it to 64 KiB
    so that idle workers hand memory back to the system; that also turns off glibc's adaptive thresholds, and a
    run that allocates and frees numpy arrays above 64 KiB at every step then pays a system call for most of them:
    Pollux on helios-1 took 77.7 user + 50.7 system CPU-s with it, 74.5 + 0.6 without (`/usr/bin/time hetsched
    elastic --policy pollux --workload helios-1 --seed 1`, 2026-11-29), and the Sia notebook's quick preset on
    Dask spent 156 CPU-s in the system. Sweep workers are short-lived, so glibc's defaults serve them better."""
    import dask

    environ = dict(dask.config.get("distributed.nanny.pre-spawn-environ", default={}) or {})
    environ.pop("MALLOC_TRIM_THRESHOLD_", None)
    return environ


def local_cluster(n_workers: int = 2):
    """Dask's LocalCluster as sweeps use it: single-thread worker processes with glibc's own memory thresholds
    (`worker_environ`). Loopback only: the scheduler, the workers and the dashboard bind 127.0.0.1 on free ports."""
    import dask
    from dask.distributed import LocalCluster

    with dask.config.set({"distributed.nanny.pre-spawn-environ": worker_environ()}):    # read as nannies start
        return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                            dashboard_address="127.0.0.1:0")
