"""hetsched: Gavel, Shockwave and Synergy on one scheduling core."""

from hetsched.model.cluster import ClusterSpec, Server
from hetsched.io import cluster_ini, cluster_json, cluster_nodes  # noqa: F401  (register the cluster file readers)
from hetsched.errors import HetschedError, SolverError, SpecError, ThroughputError, TraceError
from hetsched.model.jobs import AdaptationMode, Job
from hetsched.model.throughputs import JobKey, ThroughputTable, load_throughputs

__version__ = "0.1.0"

__all__ = ["AdaptationMode", "ClusterSpec", "HetschedError", "Job", "JobKey", "Server", "SolverError",
           "SpecError", "ThroughputError", "ThroughputTable", "TraceError", "load_throughputs"]
