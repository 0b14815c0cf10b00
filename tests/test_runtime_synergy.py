"""Synergy's server rounds on the runtime (docs/rules.md#runtime-leases): each lease names its GPUs and a CPU and
memory share, workers enforce them, and emulated servers finish jobs in the order the simulator predicts."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from machine import scaled, slowness

from hetsched import ClusterSpec, Job
from hetsched.core.pipeline import CompositionError
from hetsched.io.calibration import read_calibration
from hetsched.model.throughputs import load_throughputs
from hetsched.runtime.launch import launch_local_cluster
from hetsched.runtime.state import RuntimeState
from hetsched.runtime.store import Store
from hetsched.runtime.stubs import pb2
from hetsched.runtime.validate import InvalidInput
from hetsched.runtime.worker import EMULATED_TIME_SCALE
from hetsched.sim.simulator import simulate

TABLE = load_throughputs("gavel_simulation")
MODELS = ["alexnet", "res50", "res18", "alexnet", "mobilenet", "res50", "res18"]


def _state(tmp_path, policy="FIFO+tune"):
    return RuntimeState(Store(tmp_path / "s.sqlite"), policy, 300.0, TABLE)


def _submit(state, job_id, model, gpus=1, steps=1000):
    return state.submit(pb2.SubmitJobRequest(job_id=job_id, job_type=model, scale_factor=gpus, total_steps=steps,
                                             priority_weight=1, command="emulated"))


def _leases(state):
    return {w: list(info.to_start) for w, info in state.workers.items()}


def test_each_lease_names_its_gpus_and_a_share_that_fits_its_server(tmp_path):
    state = _state(tmp_path)
    for name in "ab":
        state.register("v100", 4, name, cpu_cores=24, mem_gb=500)
    state.round(state.now() + 300)                     # no job yet: an empty round, planned (it used to raise)
    assert state.rounds == 1 and not any(_leases(state).values())
    for i, model in enumerate(MODELS):
        _submit(state, i, model, gpus=2 if model == "mobilenet" else 1)
    state.round(state.now() + 300)
    leases = _leases(state)
    shares = set()
    for worker, msgs in leases.items():
        gpus = [g for m in msgs for g in m.local_gpus]
        assert len(gpus) == len(set(gpus)) and all(0 <= g < 4 for g in gpus)
        assert sum(m.cpu_cores for m in msgs) <= 24 and sum(m.mem_gb for m in msgs) <= 500
        shares |= {(m.job_type, m.cpu_cores, m.mem_gb) for m in msgs}
    assert sorted({m.job_id for msgs in leases.values() for m in msgs}) == list(range(len(MODELS)))
    assert len({c for _, c, _ in shares}) > 1, shares          # TUNE gives CPU-hungry models more than others
    # The same shares as the core's own plan on the same servers (nothing lost between plan and lease).
    from hetsched.core.registry import build_scheduler
    core = build_scheduler(state.pipeline, ClusterSpec.load("2x4/24/500@v100"), TABLE,
                           gpu_types=tuple(TABLE.gpu_types))
    for i, model in enumerate(MODELS):
        core.add_job(Job(i, 0.0, model, 2 if model == "mobilenet" else 1, 1000))
    plan = core.plan(0.0, servers=True)
    assert {(core.jobs[a.job_ids[0]].job_type, a.cpus, a.mem_gb) for a in plan.assignments} == shares

    # Measured progress is credited: the next round sees what the jobs reported.
    for msgs in leases.values():
        for m in msgs:
            state.leases[m.job_id].started_at = state.now()
            state.live_steps[m.job_id] = 400
    state.round(state.now() + 300)
    assert all(state.core.remaining[state.core.slot[j]] == 600 for j in range(len(MODELS)))


def test_what_server_rounds_cannot_lease_is_refused_and_the_cluster_goes_on(tmp_path):
    with pytest.raises(CompositionError, match="runtime"):
        _state(tmp_path, "FIFO+opt")
    state = _state(tmp_path)
    state.register("v100", 2, "a", cpu_cores=12, mem_gb=250)
    with pytest.raises(InvalidInput, match="one GPU type"):
        state.register("k80", 2, "b", cpu_cores=12, mem_gb=250)
    with pytest.raises(InvalidInput, match="cpu_cores and dram_gb"):
        state.register("v100", 2, "c")
    with pytest.raises(InvalidInput, match="synergy-3"):
        _submit(state, 9, "ResNet-18 (batch size 32)")
    _submit(state, 0, "res18")
    state.round(state.now() + 300)
    assert [m.job_id for msgs in _leases(state).values() for m in msgs] == [0]
    assert len(state.workers) == 1 and state.core.cluster.num_gpus == 2


def test_fifo_tune_on_emulated_servers_finishes_in_the_predicted_order(tmp_path):
    """One emulated server of 4 GPUs, 24 cores, 500 GB: each job runs at its profile's throughput at the share
    its lease carries; the simulator on the same server (one wall second = EMULATED_TIME_SCALE s) predicts the
    order in which they finish."""
    steps = [750, 450, 600, 1200, 500, 1000, 300]
    jobs = [Job(i, 0.0, m, 1, s, command="emulated") for i, (m, s) in enumerate(zip(MODELS, steps))]
    round_s = 1.0
    sim = simulate(jobs, ClusterSpec.load("1x4/24/500@v100"), "FIFO+tune", round_s=round_s * EMULATED_TIME_SCALE)
    predicted = {j: r.jct_s / EMULATED_TIME_SCALE for j, r in sim.jobs.items()}
    with launch_local_cluster("1x4/24/500@v100", tmp_path, policy="FIFO+tune", round_s=round_s,
                              emulate=True) as cluster:
        cluster.submit(jobs)
        final = cluster.wait(scaled(120))
        # `hetsched calibrate` writes the run's measured lease start for the simulator (docs/rules.md#lease-start).
        out = subprocess.run([sys.executable, "-m", "hetsched", "calibrate", "--state-dir", str(tmp_path), "--out",
                              str(tmp_path / "calibration.json")], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0 and "lease start" in out.stdout, out.stderr
    calibration = read_calibration(tmp_path / "calibration.json")
    # Measured and positive; how long a lease takes to start is the machine's (1.42 s of 1-s rounds under load).
    assert calibration["lease_starts"] >= len(jobs) and 0.0 < calibration["lease_start_s"] < float("inf")
    assert calibration["fixed_rounds"] and calibration["rounds"] > 0
    assert (final["state"] == "completed").all(), final
    shares = set(re.findall(r"lease job=\d+ .* cpus=(\S+)", (tmp_path / "scheduler.log").read_text()))
    assert len(shares) > 1, shares
    done = dict(zip(final["job_id"], final["finished_s"]))
    # Every pair the simulator separates by two rounds or more (more on a loaded machine, whose worker loop and
    # heartbeats lag) finishes in that order on the runtime.
    margin = 2 * round_s * slowness()
    wrong = [(a, b) for a in done for b in done if predicted[a] + margin <= predicted[b] and done[a] > done[b]]
    assert not wrong, (wrong, predicted, done)


def test_real_jobs_run_on_their_cpu_share(tmp_path):
    """Two real (CPU) training jobs under FIFO+tune: each process gets its share's thread count, is pinned to at
    most that many of the host's cores, and gets its memory share as its data-cache budget."""
    with launch_local_cluster("1x2/12/100@v100", tmp_path, policy="FIFO+tune", round_s=5.0) as cluster:
        cluster.submit([Job(0, 0.0, "res18", 1, 40), Job(1, 0.0, "transformer", 1, 40)])
        final = cluster.wait(scaled(240))
    assert (final["state"] == "completed").all(), final
    for tail in final["log_tail"]:
        threads, cores, cache = re.search(r"(\d+) threads on (\d+) cores, data cache (\S+) GB", tail).groups()
        assert int(threads) >= 1 and 1 <= int(cores) <= int(threads) and float(cache) > 0, tail
        print(f"\n[synergy real] {threads} threads, {cores} cores, cache {cache} GB")


def test_a_restart_keeps_what_las_has_attained(tmp_path):
    """LAS ranks by seconds run: after a scheduler restart the jobs that ran stay behind those that waited, as
    before it (docs/rules.md#runtime-restart). Before, every job restarted with no service and LAS gave the GPUs
    back to the jobs that had run, by arrival."""
    def leased(state):
        state.round(state.now() + 300)
        return sorted(j for members, _, _ in state.plan for j in members)

    state = _state(tmp_path, "LAS+fair")
    state.register("v100", 4, "a", cpu_cores=24, mem_gb=500)
    for i in range(8):
        _submit(state, i, "res18")
    assert leased(state) == [0, 1, 2, 3]
    for j in range(4):
        state.leases[j].started_at = state.now()
        state.live_steps[j] = 100
    state.epoch -= 100.0                                 # 100 s pass on the scheduler's clock
    state.store.set_meta("epoch", repr(state.epoch))
    assert leased(state) == [4, 5, 6, 7]                # the jobs without service first
    stored = {r.job_id: r.decide_history() for r in state.store.jobs()}
    assert all(99.0 < stored[j]["attained_s"] <= 101.0 and stored[j]["last_run_s"] > 0 for j in range(4))
    assert all(stored[j] is None for j in range(4, 8))                  # never credited: nothing kept

    restarted = RuntimeState(Store(tmp_path / "s.sqlite"), "LAS+fair", 300.0, TABLE)
    restarted.register("v100", 4, "a", cpu_cores=24, mem_gb=500)
    assert leased(restarted) == [4, 5, 6, 7]
    assert restarted.core.decide.histories(list(range(4))) == [(j, stored[j]) for j in range(4)]


@pytest.mark.parametrize("kept", ["no history", "attained columns"])
def test_a_state_folder_from_before_histories_opens_with_what_it_kept(tmp_path, kept):
    """A jobs table without the history column (an older server's) gets it, empty; one whose server kept LAS's
    history in the attained_s and last_run_s columns (2026-11-28) gives that back (docs/rules.md#runtime-restart)."""
    import sqlite3

    extra = (", entity TEXT NOT NULL DEFAULT '', adaptation TEXT NOT NULL DEFAULT '', batch_size INTEGER NOT NULL "
             "DEFAULT 0, pinned_gpu_types TEXT NOT NULL DEFAULT '', slo_factor REAL NOT NULL DEFAULT 0, duration_s "
             "REAL NOT NULL DEFAULT 0, attained_s REAL NOT NULL DEFAULT 0, last_run_s REAL NOT NULL DEFAULT -1, "
             "rates TEXT NOT NULL DEFAULT ''") if kept != "no history" else ""
    db = sqlite3.connect(tmp_path / "s.sqlite")
    db.execute("CREATE TABLE jobs (job_id INTEGER PRIMARY KEY, job_type TEXT NOT NULL, "
               "scale_factor INTEGER NOT NULL, total_steps INTEGER NOT NULL, priority_weight REAL NOT NULL, "
               "command TEXT NOT NULL, state TEXT NOT NULL, steps_done INTEGER NOT NULL DEFAULT 0, "
               "attempts INTEGER NOT NULL DEFAULT 0, submitted_s REAL NOT NULL, finished_s REAL, "
               f"log_tail TEXT NOT NULL DEFAULT ''{extra})")
    for j in range(2):
        db.execute("INSERT INTO jobs (job_id, job_type, scale_factor, total_steps, priority_weight, command, state, "
                   f"submitted_s) VALUES ({j}, 'res18', 1, 1000, 1.0, 'emulated', 'running', 1.0)")
    if extra:
        db.execute("UPDATE jobs SET attained_s = 50.0, last_run_s = 10.0 WHERE job_id = 0")
    db.commit()
    db.close()
    state = _state(tmp_path, "LAS+fair")
    rows = state.store.jobs()
    assert [(r.history, r.state) for r in rows] == [("", "queued")] * 2
    expected = {"attained_s": 50.0, "last_run_s": 10.0} if extra else None
    assert [r.decide_history() for r in rows] == [expected, None]
    state.register("v100", 1, "a", cpu_cores=6, mem_gb=100)
    state.round(state.now() + 300)
    assert state.core.decide.histories([0, 1]) == [(0, expected or {"attained_s": 0.0, "last_run_s": -1.0}),
                                                   (1, {"attained_s": 0.0, "last_run_s": -1.0})]
