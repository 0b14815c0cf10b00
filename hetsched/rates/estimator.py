"""Co-location throughput estimator (docs/rules.md#estimation): profile a few cells, complete the matrix, match.

Offline, every single-GPU job type has a row of normalised co-located throughputs
`Z[a, (w, b)] = T_w(a with b) / T_w(a alone)`. A set of reference job types is fully profiled. A new job is
profiled against each reference type with probability `profiling_fraction` per (GPU type, reference) cell;
probabilistic matrix factorisation fills the rest of its row, and the job is matched to the reference type
with the nearest row (cosine distance). Pair throughputs are then estimated from the references' row. Unlike
the artifact, cells are indexed by reference type, so any number of references works (docs/rules.md#estimation).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

from hetsched.errors import HetschedError
from hetsched.model.throughputs import ThroughputTable


def complete_matrix(M: np.ndarray, mask: np.ndarray, rank: int = 10, mu: float = 1e-2, iterations: int = 60,
                    seed: int = 0) -> np.ndarray:
    """Fill the unobserved cells of M (mask False) by regularised low-rank factorisation (alternating LS)."""
    rng = np.random.default_rng(seed)
    rows, cols = M.shape
    k = min(rank, rows, cols)
    U = rng.normal(scale=0.1, size=(rows, k))
    V = rng.normal(scale=0.1, size=(cols, k))
    W = mask.astype(float)
    reg = mu * np.eye(k)
    for _ in range(iterations):
        for i in range(rows):
            Vi = V * W[i][:, None]
            U[i] = np.linalg.solve(Vi.T @ V + reg, Vi.T @ M[i])
        for j in range(cols):
            Uj = U * W[:, j][:, None]
            V[j] = np.linalg.solve(Uj.T @ U + reg, Uj.T @ M[:, j])
    return np.where(mask, M, np.clip(U @ V.T, 0.0, 1.0))


@dataclass
class ThroughputEstimator:
    """Estimates co-located throughputs of single-GPU job types from a fraction of profiled cells."""

    table: ThroughputTable
    gpu_types: tuple[str, ...]
    num_reference: int = 16
    profiling_fraction: float = 0.2
    seed: int = 0
    rank: int = 10
    mu: float = 1e-2
    job_types: tuple[str, ...] = ()
    references: tuple[str, ...] = field(init=False)
    _matched: dict[str, str] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        if not self.job_types:
            self.job_types = tuple(sorted(k.job_type for k in self.table.keys if k.scale_factor == 1))
        if not 1 <= self.num_reference <= len(self.job_types):
            raise HetschedError(f"estimator: num_reference must be in 1..{len(self.job_types)}")
        if not 0 <= self.profiling_fraction <= 1:
            raise HetschedError("estimator: profiling_fraction must be in [0, 1]")
        self._index = {t: i for i, t in enumerate(self.job_types)}
        self.Z = self._normalised_matrix()                      # (types, gpus * types)
        self._rng = random.Random(self.seed + 4)
        self.references = tuple(sorted(self._rng.sample(list(self.job_types), self.num_reference)))
        self._ref_idx = np.array([self._index[t] for t in self.references])
        n_t = len(self.job_types)
        self._ref_cols = np.concatenate([w * n_t + self._ref_idx for w in range(len(self.gpu_types))])

    def _normalised_matrix(self) -> np.ndarray:
        n_t, n_g = len(self.job_types), len(self.gpu_types)
        Z = np.zeros((n_t, n_g * n_t))
        for a, ta in enumerate(self.job_types):
            for w, g in enumerate(self.gpu_types):
                alone = self.table.get(ta, 1, g)
                for b, tb in enumerate(self.job_types):
                    pair = self.table.pair(ta, tb, 1, g)[0]
                    Z[a, w * n_t + b] = pair / alone if alone > 0 else 0.0
        return Z

    def profile(self, job_type: str) -> tuple[np.ndarray, np.ndarray]:
        """The profiled row of a new job: values and mask over the reference columns."""
        true_row = self.Z[self._index[job_type], self._ref_cols]
        mask = np.array([self._rng.random() < self.profiling_fraction for _ in range(len(self._ref_cols))])
        return np.where(mask, true_row, 0.0), mask

    def match(self, job_type: str) -> str:
        """The reference type whose co-location row is nearest to this job's (profiled, completed) row."""
        if job_type in self._matched:
            return self._matched[job_type]
        if job_type not in self._index:
            raise HetschedError(f"estimator: {job_type!r} is not a single-GPU job type of the table")
        row, mask = self.profile(job_type)
        refs = self.Z[np.ix_(self._ref_idx, self._ref_cols)]
        if not mask.all():
            M = np.vstack([refs, row])
            full = np.vstack([np.ones_like(refs, bool), mask])
            try:
                row = complete_matrix(M, full, self.rank, self.mu, seed=self.seed)[-1]
            except np.linalg.LinAlgError:
                row = np.zeros_like(row)
        norms = np.linalg.norm(refs, axis=1) * np.linalg.norm(row)
        if not np.linalg.norm(row) > 0 or not np.all(np.isfinite(row)):
            best = self._rng.randrange(len(self.references))
        else:
            with np.errstate(invalid="ignore", divide="ignore"):
                distance = 1.0 - (refs @ row) / norms
            best = int(np.nanargmin(distance))
        self._matched[job_type] = self.references[best]
        return self._matched[job_type]

    def pair(self, a: str, b: str, gpu_type: str) -> tuple[float, float]:
        """Estimated steps/s of a and b sharing a GPU: reference normalised rates x the jobs' own rates."""
        ra, rb = self._index[self.match(a)], self._index[self.match(b)]
        w = self.gpu_types.index(gpu_type)
        n_t = len(self.job_types)
        za, zb = self.Z[ra, w * n_t + rb], self.Z[rb, w * n_t + ra]
        return za * self.table.get(a, 1, gpu_type), zb * self.table.get(b, 1, gpu_type)
