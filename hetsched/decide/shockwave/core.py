"""Shockwave on the one core: a planner that decides which jobs run in each of the next R rounds
(docs/rules.md#planner). Placement, crediting, the preemption penalty and batch-size adaptation are the core's
and the simulator's, exactly as for Gavel's policies; with `+tune` the planned set gets CPU and memory too.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

import numpy as np

from hetsched.rates.adaptation.profile import epoch_profile, profile_gpu_type
from hetsched.rates.adaptation.schedules import DATASET_SIZE
from hetsched.model.catalog import split_job_type
from hetsched.errors import HetschedError
from hetsched.model.jobs import Job
from hetsched.stages.decide import DecideStage
from hetsched.decide.gavel.base import Allocation, Policy, PolicyView
from hetsched.decide.shockwave.config import PlannerConfig, load_planner_config
from hetsched.decide.shockwave.fair_stages import STAGE_STOPPED
from hetsched.decide.shockwave.jobs import PlannerJob, pseudo_profile
from hetsched.decide.shockwave.milp import (WindowInputs, artifact_window_program, fair_finish_reachable, rank_program,
                                   typed_rounds, uncontended_counts, window_lp_bound, window_program)
from hetsched.decide.shockwave.fair_plan import fair_plan
from hetsched.decide.shockwave.whole_window import whole_window_plan

WHOLE_WINDOW_ARGS = ("capacity", "rounds", "round_s", "k", "bases", "log_origin", "gap")

log = logging.getLogger(__name__)


class ShockwavePolicy(Policy):
    """Shockwave: Nash social welfare over a window of future rounds with finish-time-fairness priorities."""

    name = "shockwave"

    def __init__(self, config: PlannerConfig | str | dict | None = None, seed: int | None = None, **overrides):
        if seed is not None:                        # the run's seed seeds the MILP solver
            overrides["solver_seed"] = int(seed)
        if isinstance(config, PlannerConfig):
            self.config = replace(config, **overrides)
        else:
            self.config = load_planner_config(config, **overrides)

    def allocate(self, view: PolicyView) -> Allocation:
        raise HetschedError("shockwave plans rounds, not time fractions: run it through simulate() or the runtime")


class Planner(DecideStage):
    """Shockwave's decide and select stages on the one `Scheduler`: which jobs run, on which GPU type, in each of
    the next R rounds (docs/rules.md#planner). The scheduler calls it when jobs arrive and leave, when the
    cluster changes, to pick a round's set, and when a round is credited."""

    def __init__(self, config: PlannerConfig):
        self.cfg = config
        self.planned: dict[int, PlannerJob] = {}
        self.round_ptr = 0
        # The planner's clock (docs/rules.md#planner-clock): times since `origin`, the earliest arrival it knows at
        # its first plan; round r starts at `offset + r x round` on it (offset 0 when that plan is at the origin).
        # Both are set at the first plan; after a runtime restart, the offset only (the origin is restored).
        self.origin: float | None = None
        self.offset: float | None = None
        self._reported: dict[int, tuple] = {}           # what `histories` last said of each job (the runtime's)
        self.resolve = self.reestimate = True
        self.schedule: list[list[tuple[int, int]]] = []
        self.schedule_start = 0
        self.solve_log: list[dict] = []
        self.stage_warned = False                        # a stage stopped by its time limit was warned of

    def attach(self, sched) -> None:
        self.sched = sched
        self.gpus = int(sched.capacity.sum())
        self.profile_type = profile_gpu_type(sched.table)

    def cluster_changed(self) -> None:
        self.gpus = int(self.sched.capacity.sum())
        self.resolve = True

    # ---- jobs -------------------------------------------------------------------------------------
    def job_added(self, job: Job) -> None:
        sched = self.sched
        profile, per_epoch = epoch_profile(job, sched.table, self.profile_type), 0.0
        if profile is None:
            profile, per_epoch = pseudo_profile(job, float(sched.tput[sched.slot[job.job_id]].max()))
        self.planned[job.job_id] = PlannerJob(job.job_id, job.arrival_time_s, profile, per_epoch)
        self.resolve = self.reestimate = True

    def job_removed(self, job_id: int) -> None:
        self.planned.pop(job_id, None)
        self._reported.pop(job_id, None)
        self.resolve = self.reestimate = True

    # ---- a runtime restart (docs/rules.md#runtime-restart) ------------------------------------------
    def histories(self, credited: list[int]) -> list[tuple[int, dict]]:
        """Each job whose fair-share estimates or calibration moved since the last call: its estimates (the
        momentum average's closed part in one entry, then the last estimate, which is all FT-bar reads), its
        measured samples, the round of its last measurement and its calibration factor."""
        out = []
        for job_id, pj in self.planned.items():
            if self._reported.get(job_id) != (mark := pj.history_mark()):
                self._reported[job_id] = mark
                out.append((job_id, pj.history()))
        return out

    def restore(self, job_id: int, history: dict) -> None:
        pj = self.planned[job_id]
        pj.restore(history)
        self._reported[job_id] = pj.history_mark()

    def state(self) -> dict:
        """The round count (the estimates' and calibration's round indices count from it) and the clock's origin."""
        return {"round_ptr": self.round_ptr, "origin": self.origin}

    def restore_state(self, state: dict) -> None:
        """Rounds go on counting from the stored count and times from the stored origin; the offset is set at the
        first plan, from the restarted clock (the time the scheduler was down passed for the jobs too)."""
        round_ptr, origin = int(state["round_ptr"]), state["origin"]
        self.origin = None if origin is None else float(origin)
        self.round_ptr = round_ptr

    def _batch_size(self, job_id: int) -> int:
        state = self.sched.adaptation.jobs.get(job_id) if self.sched.adaptation is not None else None
        if state is not None:
            return state.batch_size
        return split_job_type(self.sched.jobs[job_id].job_type)[1] or 1

    # ---- planning ---------------------------------------------------------------------------------
    def select(self, now: float) -> tuple[np.ndarray, np.ndarray, bool]:
        """This round's planned set: (entries, type columns, whether the window was re-solved)."""
        sched = self.sched
        offset = self.round_ptr - self.schedule_start
        recomputed = False
        if sched.jobs and (self.resolve or offset >= len(self.schedule)):
            self._set_clock(now)
            self._solve()
            recomputed, offset = True, 0
        # Skip jobs that finished, and a planned type on which a batch-size switch left the job no rate.
        pairs = [(j, w) for j, w in self.schedule[offset] if j in sched.jobs and sched.tput[sched.slot[j], w] > 0] \
            if sched.jobs else []
        entry = np.array([sched.entry_table.index[(j,)] for j, _ in pairs], np.int64)
        return entry, np.array([w for _, w in pairs], np.int64), recomputed

    def _set_clock(self, now: float) -> None:
        """The planner's clock before a plan (docs/rules.md#planner-clock): the origin and offset at the first plan
        (after a restart, the offset only); later, where rounds went by unplanned (an idle cluster, a runtime
        without workers), round r's time would lag the clock by those rounds: the offset takes the lag up."""
        sched = self.sched
        if self.offset is None:
            if self.origin is None:
                self.origin = min(pj.submit_s for pj in self.planned.values())
            self.offset = (now - self.origin) - sched.round_s * self.round_ptr
            return
        lag = (now - self.origin) - (self.offset + sched.round_s * self.round_ptr)
        if lag >= sched.round_s:                 # rounds end early, never a round late unless none ran
            self.offset += lag

    def measured(self, entry: np.ndarray, gpu_type: np.ndarray, exec_time: np.ndarray) -> None:
        """A round ran: each job's measured rate (before any batch-size switch) feeds calibration."""
        sched = self.sched
        slots = sched.members[entry, 0]
        # The round's measurements, before any switch. A heterogeneity-aware plan already weighs each type by
        # its speed, so calibration sees the rate on the profile's type: it corrects batch sizes, not types.
        rates = sched.tput[slots, gpu_type]
        if sched.n > 1 and self.cfg.heterogeneity_aware:
            rates = self._profile_rates(slots)
        for s, rate in zip(slots.tolist(), rates.tolist()):
            job_id = int(sched.job_of_slot[s])
            self.planned[job_id].measured(self.round_ptr, rate, self._batch_size(job_id), sched.round_s)

    def round_done(self) -> None:
        """A round ended: advance the window; re-plan every `reopt_rounds` rounds (the artifact's REOPT_ROUNDS)."""
        self.round_ptr += 1
        if self.round_ptr % self.cfg.reopt_rounds == 0:
            self.resolve = True

    def _profile_rates(self, slots: np.ndarray) -> np.ndarray:
        """Each job's current rate (at its current batch size) on the profile's GPU type, from the table; its
        fastest rate here where the table lacks it."""
        sched = self.sched
        rows = sched.key_row[slots]
        column = sched.table.gpu_index(self.profile_type)
        ref = np.where(rows >= 0, sched.table.isolated[np.maximum(rows, 0), column, 0], np.nan)
        return np.where(np.isfinite(ref) & (ref > 0), ref, sched.tput[slots].max(axis=1))

    def _speeds(self, ids: list[int]) -> np.ndarray:
        """(N, W) each job's current rate per GPU type over its rate on the profile's type (epoch times)."""
        sched = self.sched
        slots = np.array([sched.slot[j] for j in ids])
        if not self.cfg.heterogeneity_aware:
            return (sched.tput[slots] > 0).astype(float)
        ref = self._profile_rates(slots)
        return sched.tput[slots] / np.where(ref > 0, ref, 1.0)[:, None]

    def _rounds(self, ids, n, inputs: WindowInputs, priority, remaining) -> list[list[tuple[int, int]]]:
        """The window's rounds as (job id, type column) lists: ranked rounds, then the work-conserving fill
        (docs/rules.md#planner): idle GPUs go to unplanned jobs, longest predicted remaining time first."""
        sched = self.sched
        cfg, R, gpus = self.cfg, self.cfg.future_rounds, inputs.gpus
        if sched.n == 1:
            y = rank_program(n, gpus, priority, capacity=self.gpus, rounds=R, gap=cfg.gap,
                             time_limit_s=cfg.time_limit_s, solver=cfg.solver, seed=cfg.solver_seed,
                             options=cfg.solver_options, exact=cfg.fairness != "solver")
            typed = np.where(y, 0, -1)
        else:
            typed = typed_rounds(n, gpus, priority, inputs.speed, sched.capacity.astype(np.int64), R)
        by_remaining = np.argsort(-remaining, kind="stable")
        rates = sched.tput[[sched.slot[j] for j in ids]]
        out, seen = [], {}
        for r in range(R):                  # the fill depends only on the round's planned column: once per column
            key = typed[:, r].tobytes()
            if key not in seen:
                seen[key] = self._fill(typed[:, r].copy(), by_remaining, gpus, rates, ids)
            out.append(seen[key])
        return out

    def _fill(self, col: np.ndarray, by_remaining: np.ndarray, gpus: np.ndarray, rates: np.ndarray, ids) -> list:
        """One round's (job id, type) pairs: the planned ones, then idle GPUs to unplanned jobs in `by_remaining`
        order, each on its fastest type with room (the first such type on ties)."""
        unplanned = by_remaining[col[by_remaining] < 0].tolist()
        if unplanned:
            free = self.sched.capacity.astype(np.int64)
            np.subtract.at(free, col[col >= 0], gpus[col >= 0])
            free, need, rows = free.tolist(), gpus.tolist(), rates.tolist()
            for i in unplanned:
                if max(free) <= 0:
                    break
                g, best, w = need[i], 0.0, -1
                for t, (room, rate) in enumerate(zip(free, rows[i])):
                    if room >= g and rate > best:
                        best, w = rate, t
                if w >= 0:
                    col[i] = w
                    free[w] -= g
        return [(ids[i], int(col[i])) for i in np.flatnonzero(col >= 0).tolist()]

    def _window(self, program, inputs: WindowInputs, solve: dict) -> tuple[np.ndarray | None, str]:
        """The window program's round counts and status. Several GPU types under `fairness: "solver"`: the whole-window
        plan where it is within the gap of the program's bound, else the fair plan where it is within the gap of the
        program's LP bound, without the solver's search (docs/rules.md#whole-window-plan, #fair-plan). The first
        window whose lexicographic stage stopped at its time limit is warned of (docs/rules.md#planner-fairness)."""
        if self.sched.n > 1 and self.cfg.fairness == "solver":
            window = {key: solve[key] for key in WHOLE_WINDOW_ARGS}
            n = whole_window_plan(inputs, **window, slack=self.cfg.whole_window_slack)
            if n is not None:
                return n, "whole window"
            lower = window_lp_bound(inputs, **solve) if self.cfg.fair_plan else None
            n = None if lower is None else fair_plan(inputs, lower, **window)
            if n is not None:
                return n, "fair plan"
        n, status = program(inputs, **solve)
        if status == STAGE_STOPPED and not self.stage_warned:
            self.stage_warned = True
            log.warning("shockwave: fairness %r: a window's stage stopped at its time limit (round %d), so that plan "
                        "is the one the solver held then, which depends on its path and the machine's speed "
                        "(docs/rules.md#planner-fairness); the planner's solve_log marks every such window",
                        self.cfg.fairness, self.round_ptr)
        return n, status

    def _solve(self) -> None:
        sched = self.sched
        cfg, R, delta = self.cfg, self.cfg.future_rounds, sched.round_s
        started = time.perf_counter()
        ids = sorted(sched.jobs)
        jobs = [self.planned[j] for j in ids]
        N = len(ids)
        share = min(1.0, self.gpus / N)
        done = sched.batch_sizes.steps_done
        progress = np.array([pj.epoch_progress(done(j), self._batch_size(j)) for j, pj in zip(ids, jobs)])
        for pj in jobs:
            if not pj.fixed_epoch_steps:
                pj.calibrate(delta, DATASET_SIZE[pj.model])
        mean_epoch = np.array([pj.mean_epoch_s(p) for pj, p in zip(jobs, progress.tolist())])
        remaining = np.array([pj.remaining_s(p) for pj, p in zip(jobs, progress.tolist())])
        if self.reestimate:
            for pj, p in zip(jobs, progress.tolist()):
                pj.add_share_estimate(self.round_ptr, p, share, self.origin)
            self.reestimate = False
        fair = np.array([pj.fair_finish_s(self.round_ptr, cfg.momentum) for pj in jobs])
        inputs = WindowInputs(np.array([pj.gpus for pj in jobs]), np.array([pj.epochs for pj in jobs]),
                              progress.astype(float), mean_epoch, remaining, np.ones(N),
                              speed=self._speeds(ids) if sched.n > 1 else None, fairness=cfg.fairness)
        program = artifact_window_program if cfg.formulation == "artifact" and sched.n == 1 else window_program
        solve = dict(capacity=sched.capacity if sched.n > 1 else self.gpus, rounds=R, round_s=delta, k=cfg.k,
                     bases=cfg.log_bases, log_origin=cfg.log_origin, gap=cfg.gap, time_limit_s=cfg.time_limit_s,
                     solver=cfg.solver, seed=cfg.solver_seed, options=cfg.solver_options)
        # Ratios of times since the origin, or of durations since each job's arrival (docs/rules.md#ftf-ratio).
        since = np.array([pj.submit_s - self.origin for pj in jobs]) if cfg.ftf_ratio == "durations" else 0.0
        slack = share * (cfg.rhomax * (fair - since) - (self.offset + delta * (self.round_ptr + R) - since))
        n, status, relaxed = None, "infeasible", True
        attempt = bool((slack >= 0).all())           # else some job cannot meet its target whatever we do
        reach = fair_finish_reachable(inputs, R, delta, slack) if attempt else False
        quick = uncontended_counts(inputs, sched.capacity, R) if sched.n > 1 else None
        if reach is True and quick is not None:
            n, status = quick, "uncontended"
        elif reach is not False:
            inputs.ftf_slack_s = slack
            n, status = self._window(program, inputs, solve)
            inputs.ftf_slack_s = None
        relaxed = n is None
        priority = np.ones(N)
        if n is None:
            # A job submitted at the origin whose predictor sees no epoch left has a fair finish of 0 (docs/rules.md
            # #predictor): 0 / 0 is NaN, which is not behind; anything more over a zero fair finish is behind.
            with np.errstate(divide="ignore", invalid="ignore"):
                rho = (self.offset + delta * self.round_ptr - since + remaining / share) / (fair - since)
            behind = rho > cfg.rhomax
            exponent = np.where(remaining < delta, cfg.almost_done_exponent, cfg.lam)
            with np.errstate(over="ignore"):
                priority = np.where(behind, np.minimum(rho ** exponent, cfg.priority_cap), 1.0)
            inputs.priority = priority
            if cfg.fairness == "ftf":       # rho_j after the window = a_j - b_j P_j, where a fair finish is ahead
                ahead = np.where(fair - since > 0, fair - since, np.nan)
                t_next = self.offset + delta * (self.round_ptr + R) - since
                inputs.ftf_ratio = ((t_next + remaining / share) / ahead, mean_epoch / share / ahead, cfg.rhomax)
            n, status = (quick, "uncontended") if quick is not None else self._window(program, inputs, solve)
        if n is None:
            log.warning("shockwave: window program %s at round %d; planning by remaining time", status, self.round_ptr)
            n = np.full((N, sched.n), R) if sched.n > 1 else np.full(N, R)
            priority = remaining.copy()
        planned = time.perf_counter()
        self.schedule = self._rounds(ids, n, inputs, priority, remaining)
        self.schedule_start = self.round_ptr
        self.resolve = False
        sched.num_recomputes += 1
        done = time.perf_counter()
        self.solve_log.append({"round": self.round_ptr, "jobs": N, "relaxed": relaxed, "status": status,
                               "capped": int((priority >= cfg.priority_cap).sum()) if relaxed else 0,
                               "seconds": done - started, "rank_seconds": done - planned})  # ranked rounds, fill
