"""hetsched: Gavel, Shockwave and Synergy on one scheduling core."""

from .cluster import ClusterSpec, Server
from . import cluster_ini, cluster_json, cluster_nodes  # noqa: F401  (register the cluster file readers)
from .errors import HetschedError, SolverError, SpecError, ThroughputError, TraceError
from .jobs import AdaptationMode, Job
from .throughputs import JobKey, ThroughputTable, load_throughputs

__version__ = "0.1.0"

__all__ = ["AdaptationMode", "ClusterSpec", "HetschedError", "Job", "JobKey", "Server", "SolverError",
           "SpecError", "ThroughputError", "ThroughputTable", "TraceError", "load_throughputs"]
