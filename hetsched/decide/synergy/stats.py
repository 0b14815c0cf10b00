"""Round-weighted allocation statistics of the resource core: GPUs, CPUs and memory allocated and used."""

from __future__ import annotations

import numpy as np


class RoundStats:
    """Round-weighted sums of what was allocated (GPUs, CPUs, GB) and used (CPUs, GB capped at demand)."""

    FIELDS = ("gpu_alloc", "cpu_alloc", "mem_alloc", "cpu_used", "mem_used")

    def __init__(self, totals: tuple[float, float, float]):
        self.totals = totals
        self.sums = np.zeros(len(self.FIELDS))
        self.first_round_s: float | None = None
        self.end_s = 0.0

    def add(self, start: float, rounds: int, round_s: float, values: tuple[float, ...]) -> None:
        if self.first_round_s is None:
            self.first_round_s = start
        self.sums += np.asarray(values) * rounds
        self.end_s = start + rounds * round_s

    def averages(self, round_s: float) -> dict[str, float]:
        """Mean percentages over every round from the first non-empty one (idle rounds count as 0 %)."""
        if self.first_round_s is None:
            return {f"avg_{n}_pct": 0.0 for n in self.FIELDS}
        rounds = max((self.end_s - self.first_round_s) / round_s, 1.0)
        g, c, m = self.totals
        scale = (g, c, m, c, m)
        return {f"avg_{n}_pct": 100.0 * float(v) / (rounds * d) for n, v, d in zip(self.FIELDS, self.sums, scale)}
