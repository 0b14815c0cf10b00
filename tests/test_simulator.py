"""The simulator and the scheduling core: determinism, capacity, windows, modes, metrics."""

import numpy as np
import pandas as pd
import pytest

from hetsched import ClusterSpec, HetschedError, Job
from hetsched.sim.metrics import average_jct, finish_time_fairness, jct_cdf, summary, unfair_fraction
from hetsched.sim.simulator import SimulationError, simulate
from hetsched.traces import GavelGenerator


@pytest.fixture(scope="module")
def stream(gavel_table):
    return GavelGenerator(seed=1, mean_interarrival_s=900, multi_gpu=True, throughputs=gavel_table).jobs(120)


def run(stream, table, policy, cluster="8:8:8", gpus_per_server=None, **kw):
    return simulate(stream, ClusterSpec.parse(cluster, gpus_per_server), policy, table, **kw)


def test_same_inputs_same_result(stream, gavel_table):
    a = run(stream, gavel_table, "max_min_fairness").jobs_frame()
    b = run(stream, gavel_table, "max_min_fairness").jobs_frame()
    pd.testing.assert_frame_equal(a, b)


@pytest.mark.parametrize("policy", ["max_min_fairness_perf", "max_min_fairness_packed", "gandiva", "gavel_fifo",
                                    "finish_time_fairness_packed", "min_total_duration_packed"])
def test_rounds_respect_capacity_and_every_job_finishes(stream, gavel_table, policy):
    result = run(stream, gavel_table, policy)
    frame = result.jobs_frame()
    assert frame["finish_time_s"].notna().all()
    np.testing.assert_allclose(frame["steps_done"], frame["total_steps"], rtol=1e-9)
    assert (frame["start_time_s"] >= frame["arrival_time_s"]).all()
    tl = result.timeline_frame()
    gpus = tl[tl["partner_id"] < tl["job_id"]]        # a pair holds its GPUs once
    used = gpus.groupby(["round", "gpu_type"])["num_gpus"].sum()
    cap = {"v100": 8, "p100": 8, "k80": 8}
    assert all(v <= cap[t] for (_, t), v in used.items())
    assert not tl.duplicated(["round", "job_id"]).any()   # a job runs once per round
    if policy.endswith("packed") or policy == "gandiva":
        assert (tl["partner_id"] >= 0).any()            # space sharing actually happens


def test_window_stops_when_window_jobs_finish(gavel_table):
    jobs = iter(GavelGenerator(seed=0, mean_interarrival_s=1500, throughputs=gavel_table))
    result = simulate(jobs, ClusterSpec.parse("36:36:36"), "max_min_fairness_perf", gavel_table,
                      window=(50, 80), record_timeline=False)
    assert result.window_ids() == list(range(50, 80))
    last_finish = max(result.jobs[j].finish_time_s for j in range(50, 80))
    assert result.makespan_s == pytest.approx(last_finish, abs=360)
    assert max(result.jobs) > 80                        # jobs kept arriving during the window
    assert len(jct_cdf(result)) == 30


@pytest.mark.parametrize("ideal", [False, True])
def test_a_window_with_ids_the_job_list_lacks_is_refused_before_the_run(gavel_table, ideal):
    """(100, 200) on 120 jobs measured 20 of them, and (500, 600) ran them all before saying no job of the window
    finished; not a SimulationError, which a sweep reads as a saturated point."""
    from hetsched import HetschedError
    jobs = GavelGenerator(seed=0, mean_interarrival_s=1500, throughputs=gavel_table).jobs(120)
    named = r"window 100:200 names 80 job ids that the 120 jobs lack \(ids 0 to 119\)"
    with pytest.raises(HetschedError, match=named) as err:
        simulate(jobs, ClusterSpec.parse("4:4:4"), "max_min_fairness_perf", gavel_table, window=(100, 200),
                 ideal=ideal)
    assert not isinstance(err.value, SimulationError)
    assert len(simulate(jobs, ClusterSpec.parse("4:4:4"), "max_min_fairness_perf", gavel_table,
                        window=(100, 120), ideal=ideal).window_ids()) == 20


def test_static_makespan_beats_fifo(gavel_table):
    jobs = GavelGenerator(seed=0, static=True, multi_gpu=True, throughputs=gavel_table).jobs(60)
    mk = {p: run(jobs, gavel_table, p, "8:8:8", record_timeline=False).makespan_s
          for p in ("min_total_duration_perf", "gavel_fifo")}
    assert mk["min_total_duration_perf"] < mk["gavel_fifo"]


def test_ideal_mode_matches_rounds_at_low_load(gavel_table):
    jobs = GavelGenerator(seed=0, mean_interarrival_s=6000, throughputs=gavel_table).jobs(60)
    rounds = average_jct(run(jobs, gavel_table, "max_min_fairness_perf", "8:8:8"))
    ideal = average_jct(run(jobs, gavel_table, "max_min_fairness_perf", "8:8:8", ideal=True))
    assert ideal == pytest.approx(rounds, rel=0.1)


def test_fifo_does_not_backfill_and_rho_is_measured(gavel_table):
    jobs = GavelGenerator(seed=0, mean_interarrival_s=300, throughputs=gavel_table).jobs(40)
    fifo = run(jobs, gavel_table, "fifo_perf", "2:2:2")
    iso = run(jobs, gavel_table, "isolated", "2:2:2")
    starts = fifo.jobs_frame().sort_values("job_id")["start_time_s"].to_numpy()
    assert (np.diff(starts) >= 0).all()                 # strict FIFO: nobody overtakes
    rho = finish_time_fairness(fifo, iso)
    assert len(rho) == 40 and np.isfinite(rho).all()
    assert 0 <= unfair_fraction(rho) <= 1


def test_placement_aware_uses_unconsolidated_throughput(gavel_table):
    job = Job(0, 0.0, "ResNet-18 (batch size 64)", 4, 2e6)
    spread = run([job], gavel_table, "max_min_fairness_perf", "4:0:0", gpus_per_server=None,
                 placement_aware=True)
    packed = simulate([job], ClusterSpec.parse("4:0:0", gpus_per_server="4:1:1"), "max_min_fairness_perf",
                      gavel_table, placement_aware=True)
    fast = gavel_table.get(job.job_type, 4, "v100")
    slow = gavel_table.get(job.job_type, 4, "v100", consolidated=False)
    assert slow < fast
    assert packed.makespan_s == pytest.approx(2e6 / fast, rel=0.01)
    assert spread.makespan_s == pytest.approx(2e6 / slow, rel=0.01)


def test_lease_extension_keeps_gpus(gavel_table):
    jobs = GavelGenerator(seed=0, static=True, throughputs=gavel_table).jobs(6)
    tl = run(jobs, gavel_table, "max_min_fairness_perf", "2:2:2").timeline_frame()
    assert tl["lease_extended"].mean() > 0.5


def test_a_job_that_never_fits_is_refused_when_it_arrives(gavel_table):
    job = Job(0, 0.0, "ResNet-18 (batch size 64)", 8, 1000.0)
    with pytest.raises(SimulationError, match=r"job 0 \(ResNet-18 \(batch size 64\)\) needs 8 GPUs of one type; "
                                              r"the types it can run on have k80=2, p100=2, v100=2"):
        run([job], gavel_table, "max_min_fairness_perf", "2:2:2")
    late = [Job(0, 0.0, "ResNet-18 (batch size 64)", 1, 1e9), job.with_(job_id=1, arrival_time_s=1e6)]
    with pytest.raises(SimulationError, match="job 1 .* needs 8 GPUs") as info:   # not after job 0's 1e9 steps
        run(late, gavel_table, "max_min_fairness_perf", "2:2:2")
    assert "stuck" not in str(info.value)


def test_summary_is_json_ready(stream, gavel_table):
    row = summary(run(stream, gavel_table, "max_min_fairness_perf"))
    assert {"avg_jct_s", "makespan_s", "utilization", "num_jobs", "jct_p50_s", "jct_p99_s"} <= set(row)
    assert 0 < row["utilization"] <= 1 and row["num_jobs"] == 120


@pytest.mark.parametrize("ideal", [False, True])
def test_more_active_jobs_than_the_cap_is_a_saturated_run_in_both_mechanisms(gavel_table, ideal):
    """docs/rules.md#horizon: the cap holds after each admission, in rounds (all six join at t = 360 s) and in the
    fluid model (at each arrival: the fifth at 40 s) alike."""
    jobs = [Job(i, 10.0 * i, "A3C", 1, 1e6) for i in range(6)]
    with pytest.raises(SimulationError, match=r"saturated: [56] active jobs at t=(40|360) s \(max_active_jobs=4\)"):
        run(jobs, gavel_table, "gavel_las", "2:2:2", ideal=ideal, max_active_jobs=4)
    assert len(run(jobs, gavel_table, "gavel_las", "2:2:2", ideal=ideal, max_active_jobs=6).jobs_frame()) == 6


@pytest.mark.parametrize("ideal", [False, True])
def test_a_stream_out_of_order_or_with_a_repeated_id_is_refused(gavel_table, ideal):
    """A job id seen again after its first job finished replaced that job's record: 3 jobs in, 2 out, silently."""
    a3c = "A3C"
    with pytest.raises(SimulationError, match=r"job id 0 appears twice in the stream \(arrivals at 0 s and 5000 s\)"):
        run([Job(0, 0.0, a3c, 1, 100.0), Job(1, 10.0, a3c, 1, 100.0), Job(0, 5000.0, a3c, 1, 100.0)], gavel_table,
            "gavel_las", "2:2:2", ideal=ideal)
    with pytest.raises(SimulationError, match="job 2 arrives at 5 s, before job 1 at 10 s: a stream is in arrival"):
        run([Job(0, 0.0, a3c, 1, 100.0), Job(1, 10.0, a3c, 1, 100.0), Job(2, 5.0, a3c, 1, 100.0)], gavel_table,
            "gavel_las", "2:2:2", ideal=ideal)


@pytest.mark.parametrize("ideal", [False, True])
def test_a_job_type_the_table_lacks_is_refused_not_run_at_the_default_rate(gavel_table, ideal):
    """It ran at the runtime's 1 step/s for the whole run (a typo in a trace made a 25-hour makespan 457 h);
    docs/rules.md#unmeasured. The core's default rate is the runtime's (tests/test_runtime_core.py)."""
    for policy in ("max_min_fairness_perf", "max_min_fairness_packed", "gavel_fifo"):
        with pytest.raises(SimulationError, match=r"job 1: job type 'ResNet-19' is not in the throughput table "
                                                  r"'gavel_simulation'; did you mean 'ResNet-18 \(batch size"):
            run([Job(0, 0.0, "A3C", 1, 1000.0), Job(1, 10.0, "ResNet-19", 1, 720.0)], gavel_table, policy, "1:1:1",
                ideal=ideal)
    with pytest.raises(SimulationError, match=r"'A3C' on 2 GPU\(s\) is not in .*, which measures it on \[1\] GPU"):
        run([Job(0, 0.0, "A3C", 2, 1000.0)], gavel_table, "gavel", "4:4:4", ideal=ideal)


def test_a_pin_that_differs_from_a_type_only_in_case_is_refused_not_dropped(gavel_table):
    job = Job(0, 0.0, "ResNet-18 (batch size 64)", 1, 1000.0, pinned_gpu_types="V100|k80")
    with pytest.raises(HetschedError, match=r"pinned to GPU types \['V100'\]; GPU type names are case-sensitive: "
                                            r"did you mean \['v100'\]"):
        run([job], gavel_table, "max_min_fairness_perf", "2:2:2")     # it ran on k80s only
    assert run([job.with_(pinned_gpu_types="a100|k80")], gavel_table, "max_min_fairness_perf", "2:2:2").jobs
