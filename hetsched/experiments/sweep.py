"""Grids of simulations on Dask (a LocalCluster by default, any cluster by address), cached by config hash.

Each run is a `RunConfig`; `sweep(configs)` returns one tidy row per run (the run's summary plus the window
jobs' JCTs). Results are cached as JSON under `cache_dir/<hash>.json`, so a re-run of a notebook only
simulates what changed. A run that exceeds its round budget or its `horizon` is a saturated point (JCT = inf),
as the artifact's sweeps treat a timed-out run; `timeout_s` bounds a run's CPU time the same way (the artifact's
`--timeout`: JCT = inf, flagged `timed_out`; docs/rules.md#horizon). From a script (not a notebook), call
`sweep` under `if __name__ == "__main__":`, as for any process-based Dask LocalCluster.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import os
import time
from dataclasses import asdict, dataclass, field, replace
from itertools import islice
from pathlib import Path
from typing import Iterable, Sequence

import pandas as pd

from hetsched.core.run_config import whole_numbers
from hetsched.errors import HetschedError
from hetsched.experiments.local_dask import close_quietly, local_cluster
from hetsched.io.atomic import write_text
from hetsched.solvers import clock
from hetsched.ui.progress import progress_bar

log = logging.getLogger(__name__)
CACHE_VERSION = 5      # 2: unit-pair space sharing, CPU timeouts; 3: Synergy runs, rounds start after idle gaps;
# 4: Shockwave rules and planner; 5: keys carry the code's fingerprint


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """A hash of the package's sources and of its data tables. It is part of every cache key, so a cached run
    is reused only by the code and the tables that produced it (a version number bumped by hand was missed)."""
    from hetsched.model.throughputs import data_dir

    digest = hashlib.sha256()
    for root in (Path(__file__).resolve().parents[1], data_dir()):   # the package and its tables
        for path in sorted(root.rglob("*")):
            if path.suffix in (".py", ".csv", ".parquet", ".json", ".trace", ".ini") and path.is_file():
                digest.update(path.relative_to(root).as_posix().encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class RunConfig:
    """One simulation: stream, cluster, policy and mechanism parameters."""

    policy: str
    cluster: str = "36:36:36"                 # any form of ClusterSpec.load ("36:36:36", "16x8/24/500", *.ini)
    seed: int = 0
    generator: str = "gavel"                  # job stream family: gavel | synergy
    trace: str | None = None                  # replay this trace file instead of generating
    jobs_per_hour: float | None = None        # continuous stream
    num_jobs: int | None = None               # static stream (all at t=0), or a cap on a continuous one
    window: tuple[int, int] | None = None
    multi_gpu: bool = False
    multi_priority: bool = False
    round_s: float | None = None              # None: the policy family's (Gavel 360 s, Synergy 300 s)
    split: tuple[float, float, float] = (20, 70, 10)   # synergy: image:language:speech class split
    profiles_ratio: int | None = None         # synergy: CPU:GPU ratio of the profiles (None: the cluster's)
    round_origin_s: float = 0.0               # synergy: rounds at origin + k x round (1 s for static replays)
    ideal: bool = False
    throughputs: str = "gavel_simulation"
    estimate_colocation: tuple[int, float] | None = None
    slos: bool = False                        # draw SLO deadlines (Gavel's SLO generator)
    prices: str | None = None                 # "gcp": Gavel's hard-coded on-demand $/h
    max_rounds: int = 200_000
    max_active_per_gpu: float = 10.0          # more active jobs than this x GPUs: a saturated point
    timeout_s: float | None = None            # CPU seconds; a longer run is a timed-out point (artifact's --timeout)
    horizon: float | None = None              # x the window's expected last arrival: a run going on is saturated (R66)
    rules: str | None = None                  # an artifact's round rules: gavel | synergy | shockwave
    planner: str | None = None                # shockwave: hyper-parameter preset or JSON path
    check_invariants: bool = False            # record the timeline and count broken invariants (sim/invariants.py)
    draw_seed: int | None = None              # seed of the run's own draws (pairings, type shuffles); None: `seed`
    policy_params: tuple[tuple[str, object], ...] = ()   # keyword arguments of the policy (e.g. AlloX's tie_seed)
    labels: tuple[tuple[str, object], ...] = field(default=())   # free-form tags carried into the results

    def __post_init__(self):
        """Streams no run can mean, refused when the config is made: a rate of 0 ended in a ZeroDivisionError
        when its turn came, a cap of 0 jobs was read as no cap, and a negative one ended in islice's ValueError."""
        bad = []
        if self.jobs_per_hour is not None and not (math.isfinite(self.jobs_per_hour) and self.jobs_per_hour > 0):
            bad.append(f"jobs_per_hour={self.jobs_per_hour!r} (positive; None for a static stream)")
        if self.num_jobs is not None and not (whole_numbers((self.num_jobs,), 1) and self.num_jobs >= 1):
            bad.append(f"num_jobs={self.num_jobs!r} (a whole number >= 1, or None)")
        if not self.max_active_per_gpu > 0:
            bad.append(f"max_active_per_gpu={self.max_active_per_gpu!r} (positive)")
        if self.timeout_s is not None and not self.timeout_s >= 0:
            bad.append(f"timeout_s={self.timeout_s!r} (CPU seconds >= 0, or None)")
        if self.horizon is not None and not (self.horizon > 0 and self.jobs_per_hour and self.window):
            bad.append(f"horizon={self.horizon!r} (positive, on a continuous stream with a window; or None)")
        stream = {"generator": "gavel", "jobs_per_hour": None, "multi_gpu": False, "multi_priority": False,
                  "slos": False}                            # what generators read and a replayed trace does not
        if self.trace:
            unread = [f for f, v in stream.items() if getattr(self, f) != v] + (
                ["split"] if tuple(self.split) != (20, 70, 10) else [])
            bad += [f"{', '.join(unread)} (a replayed trace keeps its own jobs)"] if unread else []
        elif self.generator == "synergy" and (self.multi_priority or self.slos):
            bad.append(f"{', '.join(f for f in ('multi_priority', 'slos') if getattr(self, f))} (Gavel's generator "
                       f"only)")
        if bad:
            raise HetschedError(f"run config: {', '.join(bad)}")

    def key(self) -> str:
        payload = json.dumps({"v": CACHE_VERSION, "code": code_fingerprint(), **asdict(self)}, sort_keys=True,
                             default=str)
        return hashlib.sha256(payload.encode()).hexdigest()[:20]

    def with_(self, **changes) -> "RunConfig":
        return replace(self, **changes)


def run_one(config: RunConfig) -> dict:
    """Simulate one config; returns its summary row (JSON-ready)."""
    from hetsched.model.cluster import ClusterSpec
    from hetsched.sim.metrics import summary
    from hetsched.sim.simulator import SimulationConfig, SimulationError, simulate
    from hetsched.model.throughputs import load_throughputs

    table = load_throughputs(config.throughputs)
    jobs = _jobs(config, table)
    mark = clock.reading()
    row = {**asdict(config), "key": config.key(), **dict(config.labels), "timed_out": False}

    # docs/rules.md#horizon: checked every 200 rounds, so a run stops at the same round on any machine.
    horizon_s = config.horizon and config.horizon * config.window[1] * 3600.0 / config.jobs_per_hour

    def check_budget(now: float, finished: int) -> None:
        if horizon_s and now > horizon_s:
            raise SimulationError(f"window not complete at t={now / 3600:.0f} h, past {config.horizon:g} x its "
                                  f"expected last arrival")
        if config.timeout_s is not None and time.process_time() - mark.cpu_s > config.timeout_s:
            row["timed_out"] = True
            raise SimulationError(f"timed out after {config.timeout_s:.0f} CPU s at t={now:.0f} s, "
                                  f"{finished} jobs done")
    try:
        from hetsched.model.cluster import GAVEL_GCP_PRICES
        prices = dict(GAVEL_GCP_PRICES) if config.prices == "gcp" else None
        cluster = ClusterSpec.load(config.cluster)
        if prices:
            cluster = ClusterSpec.load(config.cluster, prices_per_hour={g: prices[g] for g in cluster.gpu_types})
        draws = config.seed if config.draw_seed is None else config.draw_seed
        policy = _policy(config, draws)
        base = SimulationConfig.for_system(config.rules) if config.rules else None
        rounds = {"round_s": config.round_s} if config.round_s is not None or base is None else {}
        result = simulate(jobs, cluster, policy, table, base, **rounds,
                          profiles_ratio=config.profiles_ratio, round_origin_s=config.round_origin_s,
                          window=config.window, ideal=config.ideal, seed=draws,
                          record_timeline=config.check_invariants,
                          estimate_colocation=config.estimate_colocation, max_rounds=config.max_rounds,
                          max_active_jobs=int(config.max_active_per_gpu * cluster.num_gpus),
                          on_progress=check_budget)
    except SimulationError as exc:
        log.info("%s: saturated or stuck (%s)", config, exc)
        row.update({"avg_jct_s": math.inf, "makespan_s": math.inf, "utilization": math.nan, "num_jobs": 0,
                    "jct_p50_s": math.inf, "jct_p99_s": math.inf, "total_cost": math.nan, "slo_violations": 0,
                    "avg_jct_low_s": math.inf, "avg_jct_high_s": math.inf, "saturated": True, "jcts": {}})
    else:
        row.update(summary(result))
        if config.check_invariants:
            from hetsched.sim.invariants import violations
            found = violations(result, cluster, table)
            row["violations"], row["violation_examples"] = len(found), "; ".join(found[:3])
        frame = result.jobs_frame()
        frame = frame[frame["in_window"]]
        row["saturated"] = False
        row["jcts"] = {int(j): float(v) for j, v in zip(frame["job_id"], frame["jct_s"])}
        weights = dict(zip(frame["job_id"], frame["priority_weight"]))
        for label, keep in (("low", lambda w: w == 1), ("high", lambda w: w != 1)):
            sel = [row["jcts"][j] for j, w in weights.items() if keep(w)]
            row[f"avg_jct_{label}_s"] = sum(sel) / len(sel) if sel else math.nan
    row.update(clock.since(mark))
    row["labels"] = dict(config.labels)
    return row


def _policy(config: RunConfig, seed: int):
    from hetsched.sim.simulator import policy_for

    return policy_for(config.policy, seed, system=config.rules,
                      **({"config": config.planner} if config.planner else {}), **dict(config.policy_params))


def _preflight(configs: list[RunConfig]) -> None:
    """Raise now what a config would raise when its turn comes (a misspelt policy, cluster, table or trace, an
    unreadable planner preset, a reversed window, a class split or profiles ratio that a generator refuses), not
    after the runs before it: a paper sweep runs for many minutes."""
    from hetsched.model.cluster import ClusterSpec
    from hetsched.model.throughputs import load_throughputs
    from hetsched.sim.simulator import SimulationConfig

    for config in {(c.policy, c.rules, c.planner, c.policy_params): c for c in configs}.values():
        _policy(config, 0)
    for spec in {c.cluster for c in configs}:
        ClusterSpec.load(spec)
    tables = {name: load_throughputs(name) for name in {c.throughputs for c in configs}}
    for trace in {c.trace for c in configs if c.trace}:
        if not Path(trace).is_file():
            raise HetschedError(f"sweep: trace {trace}: no such file")
    for window, max_rounds in {(c.window and tuple(c.window), c.max_rounds) for c in configs}:
        SimulationConfig(window=window, max_rounds=max_rounds)
    streams = {(c.generator, c.jobs_per_hour, c.num_jobs, tuple(c.split), c.multi_gpu, c.multi_priority, c.slos,
                c.profiles_ratio, c.cluster, c.throughputs): c for c in configs if not c.trace}
    for config in streams.values():              # a generator's class split and profiles draw with the first job
        next(iter(_jobs(config, tables[config.throughputs])), None)


def _jobs(config: RunConfig, table):
    """The run's job stream: a trace file, Synergy's generator, or Gavel's (continuous or static)."""
    from hetsched.traces import GavelGenerator, read_trace

    if config.trace:
        jobs = read_trace(config.trace)
        return jobs[: config.num_jobs] if config.num_jobs else jobs
    if config.generator == "synergy":
        from hetsched.model.cluster import ClusterSpec
        from hetsched.model.profiles import profiles_ratio_for
        from hetsched.traces.generators.synergy import SynergyGenerator

        ratio = config.profiles_ratio or profiles_ratio_for(ClusterSpec.load(config.cluster))
        gen = SynergyGenerator(seed=config.seed, jobs_per_hour=config.jobs_per_hour, split=tuple(config.split),
                               multi_gpu=config.multi_gpu, ratio=ratio)
        return islice(gen, config.num_jobs) if config.num_jobs else iter(gen)
    if config.generator != "gavel":
        raise HetschedError(f"sweep: unknown generator {config.generator!r} (gavel or synergy)")
    static = config.jobs_per_hour is None
    if static and not config.num_jobs:
        raise HetschedError(f"sweep: {config.policy} on {config.cluster}: a generated stream needs jobs_per_hour "
                            f"(continuous) or num_jobs (static, all at t = 0)")
    gen = GavelGenerator(seed=config.seed, static=static, multi_gpu=config.multi_gpu,
                         multi_priority=config.multi_priority, slos=config.slos, throughputs=table,
                         mean_interarrival_s=0.0 if static else 3600.0 / config.jobs_per_hour)
    return gen.jobs(config.num_jobs) if static else (islice(gen, config.num_jobs) if config.num_jobs else iter(gen))


def _cached(cache_dir: Path | None, config: RunConfig) -> dict | None:
    if cache_dir is None:
        return None
    path = cache_dir / f"{config.key()}.json"
    if path.exists():
        try:
            return json.loads(path.read_text())
        except json.JSONDecodeError:
            path.unlink()
    return None


def _store(cache_dir: Path | None, row: dict) -> None:
    if cache_dir is None:
        return
    write_text(cache_dir / f"{row['key']}.json", json.dumps(row, default=str))   # a killed run leaves no half file


_RESTART = ("Restart the workers, or this process, after changing the code, and install the same version on every "
            "machine.")


def _same_code(fingerprints: dict[str, str]) -> None:
    """Refuse Dask workers that run other sources or tables than this process: a run's key carries the code's
    fingerprint, so their rows would answer other configs (a long-lived `dask worker` started before an edit,
    another version installed on another machine, or a notebook kernel that imported the code before it)."""
    here = code_fingerprint()
    other = {addr: fp for addr, fp in fingerprints.items() if fp != here}
    if other:
        raise HetschedError(f"sweep: the Dask worker(s) {', '.join(sorted(other))} run other hetsched sources or "
                            f"tables than this process (code fingerprints {sorted(set(other.values()))}, here "
                            f"{here!r}). {_RESTART}")


def sweep(configs: Iterable[RunConfig], *, cache_dir: str | Path | None = "outputs/.cache",
          dask_address: str | None = None, use_dask: bool = True, n_workers: int = 2,
          progress: bool = True, run=None) -> pd.DataFrame:
    """Run every config (cached ones are read back) and return one row per config, in input order. `run`
    simulates one config (default `run_one`); any config with a `key()` and a runner that returns a JSON-ready
    row with that key goes through the same cache and workers (e.g. compare_systems.Case)."""
    run = run or run_one
    configs = list(configs)
    if not configs:                             # every figure's tidy step would fail on the empty frame instead
        raise HetschedError("sweep: no runs: the list of configs is empty (check the policies, rates, seeds or "
                            "setups given)")
    cache = Path(cache_dir) if cache_dir is not None else None
    rows: dict[str, dict] = {}
    todo: list[RunConfig] = []
    for c in configs:
        hit = _cached(cache, c)
        if hit is not None:
            rows[c.key()] = hit
        elif c.key() not in {t.key() for t in todo}:
            todo.append(c)
    # Longest runs first, for better packing on workers: the highest rates, where runs near saturation take longest
    # (Gavel's Fig. 8: AlloX and Gandiva at 6.0 jobs/h run 60-120 CPU-s, every other point 1-27 s; Synergy's merged
    # rounds make its highest rates the longest too). Started last, they were the sweep's tail.
    if all(isinstance(c, RunConfig) for c in todo):
        _preflight(todo)
        todo.sort(key=lambda c: -(c.jobs_per_hour or 0.0))
    # Under `hetsched reproduce` (HETSCHED_BATCH=1) a saved notebook would keep a widget bar's first frame
    # ("0/50"); there, one line at the end says what ran.
    batch = bool(os.environ.get("HETSCHED_BATCH"))
    shown = progress and not batch and bool(todo)
    bar = progress_bar(len(todo), "simulations", shown)
    started = time.perf_counter()
    if todo and (use_dask or dask_address):
        from dask.distributed import Client, as_completed

        cluster = None if dask_address else local_cluster(n_workers)
        client = Client(dask_address or cluster)
        try:
            _same_code(client.run(code_fingerprint))
            futures = client.map(run, todo, pure=False)
            expected = {f.key: c.key() for f, c in zip(futures, todo)}
            for future in as_completed(futures):
                row = future.result()
                _store(cache, row)
                if row["key"] != expected[future.key]:     # the sources changed during the sweep
                    raise HetschedError(f"sweep: a Dask worker answered the run {expected[future.key]} with run "
                                        f"{row['key']}: it ran other hetsched sources or tables. {_RESTART}")
                rows[row["key"]] = row
                bar.update()
        finally:
            client.close()
            if cluster is not None:
                close_quietly(cluster)
    else:
        for c in todo:
            row = run(c)
            _store(cache, row)
            rows[row["key"]] = row
            bar.update()
    bar.close()
    if batch and progress:
        print(f"simulations: {len(todo)} run, {len(configs) - len(todo)} from the cache, "
              f"{time.perf_counter() - started:.1f} s", flush=True)
    return pd.DataFrame([rows[c.key()] for c in configs])


def parse_window(window, name: str = "window") -> tuple[int, int] | None:
    """A measured job window from a CLI or papermill parameter: None, (start, end), [start, end] or
    "start:end"; errors start with `name` (e.g. "simulate: --window")."""
    if window is None or window == "":
        return None
    try:
        start, end = (window.split(":") if isinstance(window, str) else window)
        start, end = int(start), int(end)
    except (TypeError, ValueError):
        raise HetschedError(f"{name}: expected START:END job ids (e.g. 600:800), got {window!r}") from None
    if not 0 <= start < end:
        raise HetschedError(f"{name}: need 0 <= START < END, got {window!r}")
    return start, end


def repoint(configs: Iterable[RunConfig], *, cluster: str | None = None, window=None,
            throughputs: str | None = None, round_s: float | None = None) -> list[RunConfig]:
    """The same runs on another cluster, job window, throughput table or round length (None keeps each run's).

    Continuous arrival rates scale with the cluster's GPU count, so a preset's load (and its paper-equivalent
    rates) carries over to the new cluster; a run's original cluster and rate stay in its labels. Runs
    labelled `reference` (an artifact's stored case) keep their own setup."""
    from hetsched.model.cluster import ClusterSpec

    window = parse_window(window)
    if round_s is not None and not float(round_s) > 0:
        raise HetschedError(f"round_s: must be positive seconds, got {round_s!r}")
    gpus: dict[str, int] = {}                    # GPU count per cluster string, each parsed once

    def num_gpus(text: str) -> int:
        if text not in gpus:
            gpus[text] = ClusterSpec.load(text).num_gpus
        return gpus[text]

    out = []
    for c in configs:
        changes: dict = {}
        if "reference" in dict(c.labels):
            out.append(c)
            continue
        if cluster and cluster != c.cluster:
            changes["cluster"] = cluster
            if c.jobs_per_hour is not None and not c.trace:
                changes["jobs_per_hour"] = c.jobs_per_hour * num_gpus(cluster) / num_gpus(c.cluster)
        if window is not None:
            changes["window"] = window
        if throughputs:
            changes["throughputs"] = throughputs
        if round_s is not None:
            changes["round_s"] = float(round_s)
        out.append(c.with_(**changes) if changes else c)
    return out


def grid(base: RunConfig, **axes: Sequence) -> list[RunConfig]:
    """The Cartesian product of `axes` (field name -> values) applied to `base`."""
    configs = [base]
    for name, values in axes.items():
        configs = [c.with_(**{name: v}) for c in configs for v in values]
    return configs
