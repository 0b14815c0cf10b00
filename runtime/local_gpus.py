"""Which local GPUs a plan's leases name (docs/rules.md#runtime-leases).

The core decides how many GPUs each job gets on which server; which of a server's GPUs it gets is a label. A job
that keeps as many GPUs on the same workers as its running lease keeps that lease's GPUs, so that its lease is
extended rather than restarted; the other jobs take the worker's remaining GPUs, lowest first. Without this, a
mechanism that numbers GPUs in its placement order (Synergy's and heterogeneity-aware TUNE's) moved a job to
another GPU of the same server whenever the order of the jobs before it changed.
"""

from __future__ import annotations

from collections import Counter

Part = tuple[str, int]          # (worker id, local GPU) of one rank


def stable_parts(planned: list[tuple[tuple[int, ...], tuple[Part, ...]]], running: dict[int, tuple[Part, ...]],
                 num_gpus: dict[str, int]) -> list[tuple[Part, ...]]:
    """For each (job ids, parts as the plan numbered them): the parts its lease names. `running` holds the lease
    parts of the jobs that ran in the round now ending (a lease that ended earlier is never extended), `num_gpus`
    each worker's GPU count."""
    free = {w: set(range(n)) for w, n in num_gpus.items()}
    out: list[tuple[Part, ...] | None] = [None] * len(planned)
    for i, (jobs, parts) in enumerate(planned):
        old = running.get(jobs[0])
        if (old is not None and len(set(old)) == len(old) and Counter(w for w, _ in old) == Counter(w for w, _ in parts)
                and all(g in free.get(w, ()) for w, g in old)):
            out[i] = old
            for w, g in old:
                free[w].discard(g)
    for i, (_, parts) in enumerate(planned):
        if out[i] is None:
            fresh = []
            for w, _ in parts:
                g = min(free[w])
                free[w].discard(g)
                fresh.append((w, g))
            out[i] = tuple(fresh)
    return out
