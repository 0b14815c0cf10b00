"""The real-cluster runtime: gRPC scheduler and workers around the same `Scheduler` core as the simulator.

Importable as `hetsched.runtime` (the folder is the repository's top-level `runtime/`).
"""

from .lease import LeaseIterator

__all__ = ["LeaseIterator", "LocalCluster", "launch_local_cluster"]


def __getattr__(name):
    if name in ("LocalCluster", "launch_local_cluster"):
        from . import launch
        return getattr(launch, name)
    raise AttributeError(name)
