"""hetsched.experiments.sweep: the same rows with and without Dask, and a cache keyed by the config hash."""

import re

import pandas as pd
import pytest

from hetsched.errors import HetschedError
from hetsched.experiments.sweep import RunConfig, grid, sweep

BASE = RunConfig(policy="max_min_fairness_perf", cluster="4:4:4", jobs_per_hour=1.0, window=(5, 20))


def test_grid_is_a_cartesian_product():
    configs = grid(BASE, policy=["max_min_fairness", "max_min_fairness_perf"], seed=[0, 1, 2])
    assert len(configs) == 6 and len({c.key() for c in configs}) == 6


def test_dask_and_local_agree_and_cache_hits(tmp_path):
    configs = grid(BASE, policy=["max_min_fairness", "max_min_fairness_perf"], seed=[0, 1])
    local = sweep(configs, cache_dir=None, use_dask=False, progress=False)
    dask = sweep(configs, cache_dir=tmp_path, use_dask=True, n_workers=2, progress=False)
    cols = ["policy", "seed", "avg_jct_s", "makespan_s", "utilization"]
    pd.testing.assert_frame_equal(local[cols], dask[cols])
    assert len(list(tmp_path.glob("*.json"))) == 4
    again = sweep(configs, cache_dir=tmp_path, use_dask=True, progress=False)   # all cached: no cluster started
    pd.testing.assert_frame_equal(again[cols], dask[cols])


def test_a_row_says_how_much_of_its_cpu_the_solver_took():
    """One ECOS LP per recompute for LAS; FIFO calls no solver at all."""
    las, fifo = sweep([BASE, BASE.with_(policy="gavel_fifo")], cache_dir=None, use_dask=False,
                      progress=False).itertuples()
    assert las.num_recomputes > 0 and las.solver_calls == las.num_recomputes
    assert 0 < las.solver_cpu_s < las.cpu_s
    assert fifo.solver_calls == 0 and fifo.solver_cpu_s == 0


def test_saturated_run_is_infinite(tmp_path):
    row = sweep([BASE.with_(jobs_per_hour=50.0, window=(100, 200), max_rounds=50)], cache_dir=None,
                use_dask=False, progress=False).iloc[0]
    assert row["saturated"] and row["avg_jct_s"] == float("inf")


def test_cpu_timeout_gives_a_timed_out_point():
    """The artifact's --timeout: a run over its CPU budget is an infinite, flagged point; others are not."""
    slow, normal = sweep([BASE.with_(window=(5, 200), timeout_s=0.0), BASE], cache_dir=None, use_dask=False,
                         progress=False).to_dict("records")
    assert slow["timed_out"] and slow["saturated"] and slow["avg_jct_s"] == float("inf")
    assert not normal["timed_out"] and not normal["saturated"] and normal["avg_jct_s"] < float("inf")
    assert BASE.with_(timeout_s=60.0).key() != BASE.key()


def test_a_run_past_its_horizon_is_saturated_at_the_same_round_on_any_machine():
    """docs/rules.md#horizon: the bound is on simulated time, so where a run stops does not depend on the
    machine (a CPU budget cuts a run sooner on a slower one); a horizon the run stays inside changes nothing."""
    from hetsched.experiments.continuous import finish_x

    frame = sweep([BASE.with_(horizon=0.5), BASE.with_(horizon=20.0), BASE], cache_dir=None, use_dask=False,
                  progress=False)
    short, long, plain = frame.to_dict("records")
    assert short["saturated"] and not short["timed_out"] and short["avg_jct_s"] == float("inf")
    assert not long["saturated"] and long["jcts"] == plain["jcts"] and long["avg_jct_s"] == plain["avg_jct_s"]
    # What a horizon must exceed: the finished runs' ends over the window's last arrival (20 jobs at 1/h: 20 h).
    ended = finish_x(frame)
    assert list(ended.index) == [1, 2] and ended[2] == plain["num_rounds"] * 360.0 / (20 * 3600.0)
    assert 0.5 < ended[2] < 20.0
    with pytest.raises(HetschedError, match="horizon=2.0"):
        BASE.with_(jobs_per_hour=None, num_jobs=20, horizon=2.0)      # a static stream has no arrival span


def test_the_fluid_model_keeps_every_bound_of_the_round_loop():
    """`ideal` runs (Gavel Fig. 13) stop at a horizon, at a CPU budget and at the active-job cap, checked every 200
    events as the round loop checks them every 200 rounds; before, the fluid model ignored all three."""
    wide = BASE.with_(ideal=True, window=(5, 200), jobs_per_hour=0.3)
    short, slow, crowded, plain = sweep([wide.with_(horizon=0.5), wide.with_(timeout_s=0.0),
                                         wide.with_(max_active_per_gpu=0.1), wide], cache_dir=None, use_dask=False,
                                        progress=False).to_dict("records")
    assert short["saturated"] and not short["timed_out"] and short["avg_jct_s"] == float("inf")
    assert slow["saturated"] and slow["timed_out"]
    assert crowded["saturated"] and not crowded["timed_out"]
    assert not plain["saturated"] and plain["avg_jct_s"] < float("inf")


def test_paper_preset_carries_the_timeout():
    from hetsched.experiments.continuous import PAPER_TIMEOUT_S, configs
    assert {c.timeout_s for c in configs("single", "paper", ["allox"])} == {PAPER_TIMEOUT_S}
    assert {c.timeout_s for c in configs("single", "quick", ["allox"])} == {None}
    # A horizon bounds the runs in simulated time: no budget that a slower machine would hit sooner (R66).
    assert {(c.horizon, c.timeout_s) for c in configs("single", "paper", ["allox"], horizon=5.0)} == {(5.0, None)}


def test_repoint_moves_runs_and_keeps_the_load():
    from hetsched.errors import HetschedError
    from hetsched.experiments import continuous as C
    from hetsched.experiments.sweep import repoint

    base = C.configs("single", "quick", ["max_min_fairness_perf"])               # 12:12:12, rates x 1/3
    moved = C.configs("single", "quick", ["max_min_fairness_perf"], cluster="24:12:12", window="100:200",
                      throughputs="gavel_physical", round_s=720)
    assert [c.jobs_per_hour * 36 / 48 for c in moved] == pytest.approx([c.jobs_per_hour for c in base])
    assert {(c.cluster, c.window, c.throughputs, c.round_s) for c in moved} == {
        ("24:12:12", (100, 200), "gavel_physical", 720.0)}
    assert dict(moved[0].labels)["paper_rate"] == dict(base[0].labels)["paper_rate"]
    reference = base[0].with_(labels=(("reference", "stored"),))
    assert repoint([reference], cluster="4:4:4") == [reference]
    for bad in ("12", "9:3", "a:b"):
        with pytest.raises(HetschedError, match="window"):
            repoint(base, window=bad)
    with pytest.raises(HetschedError, match="round_s"):
        repoint(base, round_s=0)


def test_cache_keys_follow_the_code(monkeypatch):
    """A cached run is reused only by the code and the tables that produced it."""
    from hetsched.experiments import sweep as S

    fingerprint = S.code_fingerprint()
    assert len(fingerprint) == 16 and S.code_fingerprint() == fingerprint
    before = BASE.key()
    monkeypatch.setattr(S, "code_fingerprint", lambda: "0" * 16)
    assert BASE.key() != before


def test_a_sweep_on_a_dask_cluster_started_from_the_command_line(dask_cli):
    """What a user runs on several machines (`dask scheduler`, then `dask worker` on each), here on loopback."""
    from dask.distributed import Client
    with Client(dask_cli, timeout=60) as client:
        workers = {w["host"] for w in client.scheduler_info()["workers"].values()}
    assert workers == {"127.0.0.1"}
    configs = grid(BASE, policy=["max_min_fairness", "max_min_fairness_perf"], seed=[0, 1])
    remote = sweep(configs, cache_dir=None, dask_address=dask_cli, progress=False)
    local = sweep(configs, cache_dir=None, use_dask=False, progress=False)
    cols = ["policy", "seed", "avg_jct_s", "makespan_s", "utilization"]
    pd.testing.assert_frame_equal(local[cols], remote[cols])


def _other_code(other: bool) -> None:
    """On a Dask worker: pretend its sources differ from the client's (as after an edit the worker never
    re-imported), or undo it."""
    import hetsched.experiments.sweep as module
    real = getattr(module, "_real_fingerprint", module.code_fingerprint)
    module._real_fingerprint = real
    module.code_fingerprint = (lambda: "f" * 16) if other else real


def test_a_worker_with_other_code_is_refused(dask_cli, tmp_path):
    """A long-lived worker that imported other sources returned rows keyed by its own code, and the sweep ended in
    a KeyError (or, keyed by the client's code, would have cached the other code's results as this code's)."""
    import sys

    import cloudpickle
    from dask.distributed import Client

    cloudpickle.register_pickle_by_value(sys.modules[__name__])     # the workers cannot import this module
    with Client(dask_cli, timeout=60) as client:
        one = sorted(client.scheduler_info()["workers"])[0]
        client.run(_other_code, True, workers=[one])
        try:
            with pytest.raises(HetschedError, match=f"worker\\(s\\) {one} run other hetsched sources"):
                sweep(grid(BASE, seed=[0, 1]), cache_dir=tmp_path, dask_address=dask_cli, progress=False)
        finally:
            client.run(_other_code, False, workers=[one])
            cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    assert not list(tmp_path.glob("*.json"))                      # refused before anything ran
    assert len(sweep(grid(BASE, seed=[0, 1]), cache_dir=tmp_path, dask_address=dask_cli, progress=False)) == 2


@pytest.mark.parametrize("bad, named", [(dict(jobs_per_hour=0.0), "jobs_per_hour=0.0"),
                                        (dict(jobs_per_hour=float("nan")), "jobs_per_hour=nan"),
                                        (dict(num_jobs=0), "num_jobs=0"), (dict(num_jobs=-3), "num_jobs=-3"),
                                        (dict(max_active_per_gpu=0.0), "max_active_per_gpu=0.0"),
                                        (dict(timeout_s=-1.0), "timeout_s=-1.0")])
def test_a_run_config_refuses_streams_no_run_can_mean(bad, named):
    """A rate of 0 ended in a ZeroDivisionError when its run's turn came, a cap of 0 jobs was read as no cap and
    a negative one ended in islice's ValueError: each is refused, by name, when the config is made."""
    with pytest.raises(HetschedError, match=re.escape(named)):
        BASE.with_(**bad)
    assert BASE.with_(timeout_s=0.0).timeout_s == 0.0          # a zero budget is a real one (test above)


@pytest.mark.parametrize("stream, named", [
    (dict(trace="t.csv", jobs_per_hour=None, multi_gpu=True), "multi_gpu (a replayed trace keeps its own jobs)"),
    (dict(trace="t.csv", split=(10, 80, 10)), "jobs_per_hour, split (a replayed trace keeps its own jobs)"),
    (dict(generator="synergy", slos=True), "slos (Gavel's generator only)"),
])
def test_a_run_config_refuses_stream_fields_its_stream_does_not_read(stream, named):
    """A replayed trace ran as it is whatever rate, GPU counts or class split the config gave, and Synergy's
    generator drew no SLOs or priorities: same rows, under another config's name and cache key."""
    with pytest.raises(HetschedError, match=re.escape(named)):
        BASE.with_(**stream)


def test_an_empty_sweep_is_refused_not_a_keyerror_in_the_figure():
    """A notebook given no policies swept nothing, and its tidy step raised KeyError 'avg_jct_s'."""
    with pytest.raises(HetschedError, match="no runs: the list of configs is empty"):
        sweep([], cache_dir=None, use_dask=False)


@pytest.mark.parametrize("bad, message", [(dict(policy="las_prefr"), "unknown policy"),
                                          (dict(cluster="36:36"), "V100:P100:K80"),
                                          (dict(throughputs="gavel_simulaton"), "no throughput dataset"),
                                          (dict(trace="missing.csv", jobs_per_hour=None), "no such file"),
                                          (dict(policy="shockwave", planner="tacc_32gpu"), "presets"),
                                          (dict(window=(20, 10)), "window="),
                                          (dict(generator="synergy", cluster="2x8/24/500", split=(10, 10)),
                                           "class split"),
                                          (dict(generator="synergy", cluster="2x8/24/500", profiles_ratio=-1),
                                           "ratio must be a whole number"),
                                          (dict(jobs_per_hour=None, window=None, num_jobs=None),   # a TypeError
                                           "needs jobs_per_hour \\(continuous\\) or num_jobs")])
def test_a_misspelt_config_stops_the_sweep_before_any_run(tmp_path, bad, message):
    """A typo in the last config of a grid surfaced only when its turn came, after the runs before it."""
    configs = [*grid(BASE, seed=[0, 1]), BASE.with_(seed=2, **bad)]
    with pytest.raises(HetschedError, match=message):
        sweep(configs, cache_dir=tmp_path, use_dask=False, progress=False)
    assert not list(tmp_path.glob("*.json"))


def test_a_worker_killed_after_the_results_are_in_is_not_reported(caplog):
    """On a loaded machine a nanny kills a worker that takes more than 4 s to exit and logs a WARNING; a sweep's
    closing cluster keeps that out of the caller's output (it broke `hetsched compare`'s clean stderr) and leaves
    the logger's level as it was."""
    import logging

    from hetsched.experiments.local_dask import close_quietly

    class SlowToExit:
        def close(self):
            logging.getLogger("distributed.nanny").warning("Worker process still alive after 4.0 seconds, killing")
            logging.getLogger("distributed.nanny").error("a real error still shows")

    nanny = logging.getLogger("distributed.nanny")
    before = nanny.level
    with caplog.at_level(logging.WARNING):
        close_quietly(SlowToExit())
    assert [r.getMessage() for r in caplog.records] == ["a real error still shows"]
    assert nanny.level == before


def _worker_environ(_):
    import os

    return {k: os.environ.get(k) for k in ("MALLOC_TRIM_THRESHOLD_", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}


def test_sweep_workers_keep_glibcs_memory_thresholds():
    """Dask's nannies set MALLOC_TRIM_THRESHOLD_=65536, which cost a Pollux run 50 CPU-s of system time (local_dask
    `worker_environ`); the sweep's workers run without it and keep Dask's one thread per BLAS/OpenMP pool; the
    process's Dask configuration is as it was."""
    import dask
    from dask.distributed import Client

    from hetsched.experiments.local_dask import close_quietly, local_cluster

    before = dask.config.get("distributed.nanny.pre-spawn-environ")
    cluster = local_cluster(1)
    try:
        with Client(cluster) as client:
            seen = client.submit(_worker_environ, 0, pure=False).result(timeout=120)
    finally:
        close_quietly(cluster)
    assert seen == {"MALLOC_TRIM_THRESHOLD_": None, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    assert dask.config.get("distributed.nanny.pre-spawn-environ") == before
    assert before.get("MALLOC_TRIM_THRESHOLD_") is not None      # Dask's default, which this test would miss
