"""Synergy-OPT as a round of the resource core: the GPU-count fill runs at program 1's grid points."""

from __future__ import annotations

import numpy as np

from hetsched.model.profiles import CPU_LEVELS, MEM_LEVELS


class OptRound:
    """The `+opt` mechanism's round (docs/rules.md#opt) of a `ServerRounds` (`stage`), which holds it as `opt`."""

    def __init__(self, stage):
        self.stage = stage

    def budgets(self) -> tuple[float, float]:
        stage = self.stage
        pool = stage.pool
        if stage.policy.opt_artifact_budget and stage.policy.ordering.name not in ("FIFO", "SRTF"):
            return float(pool.size[0] * pool.num), float(pool.size[0] * pool.num)   # the artifact's bug
        return pool.totals[1], pool.totals[2]

    def everyone_best(self, slots: np.ndarray) -> bool:
        """All runnable jobs fit by GPUs and every one at its best grid point fits the CPU/memory budgets."""
        stage = self.stage
        if stage._demand_gpus > stage.pool.num_gpus:
            return False
        cpu, mem = self.budgets()
        need = stage._class_count @ stage._k_best[:, 2:4]
        return bool(need[0] <= cpu and need[1] <= mem)

    def plan(self, order: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
        """Synergy-OPT on the GPU-count fill: every job runs at the grid point program 1 gives it (no GPUs
        are reserved: an idealised upper bound, docs/rules.md#opt). Returns the jobs, their credits and whether the
        solution is every job at its best point (then the order does not matter)."""
        from hetsched.place.opt import choose_points

        stage = self.stage
        jobs = stage._gpu_fill(order)
        if not len(jobs):
            stage._opt_alloc = (0.0,) * 5
            return jobs, np.zeros(0), False
        codes = stage.cls[jobs]
        counts = np.bincount(codes, minlength=len(stage._c_grid))
        pool = stage.pool
        cpu_budget, mem_budget = self.budgets()
        grids = stage._k_grid
        points = choose_points(list(grids), [r.gpus for r in stage._c_res], counts.tolist(), cpu_budget,
                               mem_budget, cpu_budget / pool.num_gpus, mem_budget / pool.num_gpus)
        # Jobs of a class take its points best first, in the policy's order.
        flat = np.array([p for pts in points for p, n in pts for _ in range(n)], np.int64)
        offset = np.concatenate([[0], np.cumsum(counts)[:-1]])
        by_class = np.argsort(codes, kind="stable")
        rank = np.empty(len(jobs), np.int64)
        rank[by_class] = np.arange(len(jobs)) - offset[codes[by_class]]
        point = flat[offset[codes] + rank]
        tput = grids[codes, point]
        credit = np.floor(stage.round_s / (stage.iter_time[jobs] / tput))
        g = stage.escale[jobs].astype(float)
        nm = len(MEM_LEVELS)
        cpu = np.asarray(CPU_LEVELS)[point // nm] * g
        mem = np.asarray(MEM_LEVELS)[point % nm] * g
        stage._opt_alloc = (float(g.sum()), float(cpu.sum()), float(mem.sum()),
                           float(np.minimum(cpu, stage.cpu_demand[jobs]).sum()),
                           float(np.minimum(mem, stage.mem_demand[jobs]).sum()))
        everyone_best = all(len(pts) <= 1 for pts in points) and \
            all(not pts or grids[k, pts[0][0]] == grids[k].max() for k, pts in enumerate(points))
        return jobs, credit, everyone_best and len(jobs) == len(stage.active_slots())

    def best_points(self) -> np.ndarray:
        """Per class, Synergy-OPT's best point: (throughput, GPUs, CPUs, GB, CPUs, GB) - allocation twice, as
        allocated and as used (capped at the ideal demand)."""
        from hetsched.place.opt import CPU, MEM, fair_index, pareto_points

        stage = self.stage
        cpu, mem = self.budgets()
        gpus = stage.pool.num_gpus
        fair_p = fair_index(CPU_LEVELS, cpu / gpus) * len(MEM_LEVELS) + fair_index(MEM_LEVELS, mem / gpus)
        rows = []
        for grid, res in zip(stage._c_grid, stage._c_res):
            flat = grid.ravel()
            pts = pareto_points(flat, flat[fair_p]) or [fair_p]
            p = max(pts, key=lambda q: (flat[q], -q))
            g = res.gpus
            rows.append((flat[p], g, CPU[p] * g, MEM[p] * g, min(CPU[p] * g, res.cpus), min(MEM[p] * g, res.mem_gb)))
        return np.array(rows, float).reshape(-1, 6)
