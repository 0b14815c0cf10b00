"""Which local GPUs a plan's leases name (docs/rules.md#runtime-leases).

The core decides how many GPUs each job gets on which server; which of a server's GPUs it gets is a label. A job
that keeps as many GPUs on the same workers as its running lease keeps that lease's GPUs, so that its lease is
extended rather than restarted; the other jobs take the worker's remaining GPUs, lowest first. Without this, a
mechanism that numbers GPUs in its placement order (Synergy's and heterogeneity-aware TUNE's) moved a job to
another GPU of the same server whenever the order of the jobs before it changed. The workers' free GPUs are the
one server model's (`Servers`, docs/rules.md#servers): one server per worker, its GPUs in the cluster's numbering.
"""

from __future__ import annotations

from collections import Counter

from hetsched.model.servers import Servers

Part = tuple[str, int]          # (worker id, local GPU) of one rank


def stable_parts(planned: list[tuple[tuple[int, ...], tuple[int, ...]]], running: dict[int, tuple[Part, ...]],
                 servers: Servers, owner: dict[int, Part]) -> list[tuple[Part, ...]]:
    """For each (job ids, GPU ids as the plan numbered them): the parts its lease names. `running` holds the lease
    parts of the jobs that ran in the round now ending (a lease that ended earlier is never extended), `servers`
    the workers' servers and `owner` each GPU id's (worker, local GPU)."""
    if not planned:
        return []
    gpu_of = {part: g for g, part in owner.items()}
    server_of = servers.server_of
    servers.reset()
    out: list[tuple[Part, ...] | None] = [None] * len(planned)
    for i, (jobs, gpus) in enumerate(planned):
        old = running.get(jobs[0])
        ids = tuple(gpu_of.get(part, -1) for part in old) if old is not None else ()
        if (ids and -1 not in ids and len(set(ids)) == len(ids)
                and Counter(server_of[g] for g in ids) == Counter(server_of[g] for g in gpus) and servers.holds(ids)):
            out[i] = old
            servers.take(ids)
    for i, (_, gpus) in enumerate(planned):
        if out[i] is None:
            out[i] = tuple(owner[servers.take_lowest(server_of[g], 1)[0]] for g in gpus)
    return out
