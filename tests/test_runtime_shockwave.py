"""Shockwave's batch-size adaptation on the runtime (docs/rules.md#runtime-batch-sizes): the core switches adaptive
jobs as in the simulator, the runtime re-counts their steps, keeps them across a restart, re-counts reports made at
another batch size of the job's schedule and refuses any other; jobs adopt the switch in place."""

from __future__ import annotations

import io
import tarfile
import tempfile

import pytest

from hetsched import ClusterSpec, Job
from hetsched.errors import HetschedError
from hetsched.model.throughputs import JobKey, load_throughputs
from hetsched.rates.adaptation.schedules import iterations_per_epoch
from hetsched.runtime.checkpoints import CheckpointStore
from hetsched.runtime.lease import LeaseIterator
from hetsched.runtime.replay import emulated_throughputs, job_types_of, run_on_local_cluster
from hetsched.runtime.state import RuntimeState
from hetsched.runtime.store import Store
from hetsched.runtime.stubs import pb2
from hetsched.runtime.validate import InvalidInput
from hetsched.sim.simulator import SimulationConfig, simulate

TABLE = load_throughputs("gavel_simulation")
GNS_TYPE = "ResNet-18 (batch size 64)"          # GNS doubles it at epoch 11 (table row: 64, sf 1, > 11 epochs)
IPE64, IPE128 = iterations_per_epoch("ResNet-18", 64), iterations_per_epoch("ResNet-18", 128)


def _state(path, policy="max_min_fairness_perf"):
    return RuntimeState(Store(path / "s.sqlite"), policy, 10.0, TABLE, checkpoints=CheckpointStore(path / "ckpt"))


def _checkpoint(steps: int) -> bytes:
    buf, data = io.BytesIO(), f"step-{steps}".encode()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("model.pt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _submit(state, job_id, job_type=GNS_TYPE, adaptation="gns", total_steps=40 * IPE64):
    return state.submit(pb2.SubmitJobRequest(job_id=job_id, job_type=job_type, scale_factor=1,
                                             total_steps=total_steps, priority_weight=1, command="emulated",
                                             adaptation=adaptation))


def _report(state, lease, steps, batch_size=0, seconds=1.0, steps_run=1):
    return state.update_lease(pb2.UpdateLeaseRequest(job_id=lease.job_id, lease_id=lease.lease_id, steps_done=steps,
                                                     steps_checkpointed=steps, seconds=seconds, steps_run=steps_run,
                                                     batch_size=batch_size), lease.lease_token)


def test_a_switch_recounts_steps_survives_a_restart_and_converts_reports(tmp_path):
    state = _state(tmp_path)
    worker_id, session = state.register("v100", 1, "a")
    _submit(state, 0)
    state.round(state.now() + 10)
    lease = state.workers[worker_id].to_start[0]
    assert lease.batch_size == 64 and lease.total_steps == 40 * IPE64
    state.heartbeat(pb2.HeartbeatRequest(worker_id=worker_id, session=session))
    _report(state, lease, 12 * IPE64 + 5, batch_size=64)      # past epoch 11: the next boundary flags it
    state.round(state.now() + 10)
    assert state.store.job(0).batch_size == 0                  # flagged, not switched: it must run a round first
    state.round(state.now() + 10)                              # ran (its lease was extended): switches now
    row = state.store.job(0)
    assert (row.batch_size, row.total_steps) == (128, 40 * IPE128)
    assert row.steps_done == 13 * IPE128                       # 12 epochs and a part: 13 whole epochs at 128
    # The process still runs at 64 until it hears of the switch: its report is re-counted and answered.
    resp = _report(state, lease, 14 * IPE64, batch_size=64)
    assert (resp.batch_size, resp.total_steps, resp.steps_done) == (128, 40 * IPE128, 14 * IPE128)
    assert _report(state, lease, 15 * IPE128, batch_size=128).steps_done == 15 * IPE128
    with pytest.raises(InvalidInput, match=r"batch_size: 100 is not in job 0's gns schedule \[64, 128, 256\]"):
        _report(state, lease, 100, batch_size=100)
    with pytest.raises(InvalidInput, match="seconds"):
        _report(state, lease, 15 * IPE128, batch_size=128, seconds=float("nan"))
    with pytest.raises(InvalidInput, match="steps_done"):                    # beyond the total at 64
        _report(state, lease, 40 * IPE64 + 1, batch_size=64)
    # A checkpoint names the batch size its steps are counted at (CheckpointChunk.batch_size).
    state.checkpoint_put(lease.lease_token, 0, lease.lease_id, 16 * IPE64, iter([_checkpoint(16)]), batch_size=64)
    assert state.stored_steps[0] == state.store.job(0).steps_done == 16 * IPE128
    with pytest.raises(InvalidInput, match="batch_size: 100"):
        state.checkpoint_put(lease.lease_token, 0, lease.lease_id, 10, iter([_checkpoint(0)]), batch_size=100)
    status = state.status(pb2.StatusRequest())
    assert status.jobs[0].batch_size == 128 and status.batch_size_switches == 1
    assert status.restarts == 0 and status.mean_restart_s == 0.0     # its one lease never restarted
    # Measured at 128, far from the table's 128 rate; stored with the round (docs/rules.md#runtime-restart).
    w = state.core.gpu_types.index("v100")
    _report(state, lease, 17 * IPE128, batch_size=128, seconds=3.0, steps_run=500)
    _report(state, lease, 18 * IPE128, batch_size=128, seconds=5.0, steps_run=1500)
    measured = state.core.tput[state.core.slot[0], w]
    assert measured > 10 * TABLE.isolated[TABLE.index(JobKey("ResNet-18 (batch size 128)", 1)), w, 0]
    state.round(state.now() + 10)
    # A restarted scheduler resumes the job at 128: the core runs it at its measured 128 rate (restored once the
    # batch size is; before, at the table's), over the re-counted steps.
    state.store.close()
    again = _state(tmp_path)
    again.register("v100", 1, "a")
    again.round(again.now() + 10)
    core = again.core
    s = core.slot[0]
    assert core.tput[s, w] == measured and core.measurements.measured_rates(0) == ("ResNet-18 (batch size 128)",
                                                                      {"v100": measured})
    assert core.remaining[s] == 40 * IPE128 - 18 * IPE128
    assert again.workers[next(iter(again.workers))].to_start[0].batch_size == 128


def test_bad_adaptive_submissions_are_refused(tmp_path):
    state = _state(tmp_path)
    with pytest.raises(InvalidInput, match="static, accordion or gns"):
        _submit(state, 0, adaptation="sometimes")
    with pytest.raises(InvalidInput, match="'A3C' cannot adapt"):
        _submit(state, 0, job_type="A3C", adaptation="accordion")
    with pytest.raises(InvalidInput, match="does not adapt batch sizes"):
        _submit(_state(tmp_path / "o", "FIFO"), 0, job_type="res18")
    _submit(state, 0, adaptation="static")
    state.register("v100", 1, "a")
    state.round(state.now() + 10)
    lease = next(iter(state.workers.values())).to_start[0]
    assert lease.batch_size == 0
    assert _report(state, lease, 10, batch_size=64).batch_size == 0        # its own type's batch size
    with pytest.raises(InvalidInput, match="does not adapt"):
        _report(state, lease, 10, batch_size=32)


class _Stub:
    """Answers UpdateLease like a scheduler that has just switched the job from 64 to 128."""

    def __init__(self):
        self.requests = []

    def UpdateLease(self, req, timeout=None):
        self.requests.append(req)
        return pb2.UpdateLeaseResponse(keep_running=True, deadline_s=1e12, now_s=0.0, batch_size=128,
                                       total_steps=40 * IPE128, steps_done=13 * IPE128)


def test_the_iterator_adopts_a_switch_in_place():
    saved, sizes = [], []

    def rebatch(batch_size):
        sizes.append(batch_size)
        return iter(lambda: batch_size, None)
    it = LeaseIterator(rebatch(64), total_steps=40 * IPE64, save=saved.append, batch_size=64, rebatch=rebatch,
                       report_every_s=0.0)
    it.managed, it.checkpoint_dir, it.job_id, it.lease_id, it._pb2 = True, None, 0, "x", pb2
    it._stub, it.deadline, it._clock_offset, it.adaptive = _Stub(), 1e12, 0.0, True
    it.steps = it._start = 12 * IPE64 + 5
    batch = next(it)                        # reports at 64, hears 128
    assert it._stub.requests[0].batch_size == 64
    assert (it.batch_size, it.steps, it.total_steps) == (128, 13 * IPE128, 40 * IPE128)
    assert sizes == [64, 128] and saved == [13 * IPE128]      # new data, checkpointed at the re-counted step
    assert batch == 128
    next(it)
    assert it._stub.requests[-1].batch_size == 128 and it._stub.requests[-1].steps_done == 13 * IPE128 + 1


def test_emulated_shockwave_switches_as_the_simulator_does():
    """Two adaptive jobs and a static one on emulated workers under Shockwave's planner: each adaptive job ends
    at the batch size, and the re-counted total, that the simulator gives it."""
    recommendation = iterations_per_epoch("Recommendation", 512)
    jobs = [Job(0, 0.0, GNS_TYPE, 1, 24 * IPE64, mode="gns"),
            Job(1, 0.0, "Recommendation (batch size 512)", 1, 100 * recommendation, mode="accordion"),
            Job(2, 0.0, "ResNet-18 (batch size 32)", 1, 4000)]
    slowdowns = {"v100": 0.05}                      # 4,000 steps/s
    table = emulated_throughputs(job_types_of(jobs), slowdowns)
    sim = simulate(jobs, ClusterSpec.parse("2:0:0"), "shockwave", table, SimulationConfig(), round_s=1.0,
                   dynamic_adaptation=True)                                 # the runtime's rules, not the artifact's
    ends = sim.jobs_frame().set_index("job_id")["jct_s"]
    switches = sim.adaptations
    expected = {j: int(g["new_batch_size"].iloc[-1]) for j, g in switches.groupby("job_id")}
    assert (switches["time_s"] <= ends[switches["job_id"]].to_numpy()).all()
    assert expected == {0: 128, 1: 8192}                   # the case exercises both schedules
    with tempfile.TemporaryDirectory() as state_dir:
        done = run_on_local_cluster(jobs, "2:0:0", state_dir, policy="shockwave", round_s=1.0, timeout_s=90,
                                    slowdowns=slowdowns)
    assert sorted(done["job_id"]) == [0, 1, 2]
    got = dict(zip(done["job_id"], done["batch_size"]))
    assert {j: got[j] for j in expected} == expected and got[2] == 0
    totals = dict(zip(done["job_id"], done["total_steps"]))
    assert totals[0] == 24 * IPE128 and totals[1] == 100 * iterations_per_epoch("Recommendation", 8192)
    assert (done["steps_done"] == done["total_steps"]).all()


def test_a_restart_keeps_the_planners_rounds_estimates_and_calibration(tmp_path):
    """Shockwave's finish-time fairness reads each job's fair-share finish estimates since its arrival (FT-bar) and
    calibrates its profile from the samples measured since round 0, counted in the planner's rounds on its clock: a
    restarted scheduler gives all of that back (docs/rules.md#runtime-restart). Before, the restarted planner
    counted rounds from 0 again, from a new origin, with one fresh estimate per job and no samples."""
    state = _state(tmp_path, "shockwave")
    worker_id, session = state.register("v100", 1, "a")
    for j in range(3):
        _submit(state, j, "ResNet-18 (batch size 32)", adaptation="", total_steps=10 ** 7)
    for r in range(12):
        if r == 5:
            _submit(state, 3, "ResNet-18 (batch size 32)", adaptation="", total_steps=10 ** 7)   # a re-estimate
        state.epoch -= 10.0                             # 10 s pass on the scheduler's clock
        state.round(state.now() + 10)
    before = state.core.decide
    ptr, momentum = before.round_ptr, before.cfg.momentum
    assert ptr >= 10 and all(before.planned[j].num_shares >= 2 for j in range(3))
    assert any(before.planned[j].samples > 0 for j in range(4))
    state.store.close()

    again = _state(tmp_path, "shockwave")
    again.register("v100", 1, "a")
    again._admit()                                      # the jobs join the new core, before its first plan
    after = again.core.decide
    assert (after.round_ptr, after.origin, after.offset) == (ptr, before.origin, None)
    for j in range(4):
        old, new = before.planned[j], after.planned[j]
        assert (new.samples, new.last_round, new.amp) == (old.samples, old.last_round, old.amp)
        for r in (ptr, ptr + 7):
            assert new.fair_finish_s(r, momentum) == pytest.approx(old.fair_finish_s(r, momentum), rel=1e-12)
    again.round(again.now() + 10)                       # plans on the restarted clock
    assert after.offset == pytest.approx(again.now() - 10 * ptr - after.origin, abs=1.0)


def test_an_unreadable_planner_history_costs_only_itself(tmp_path, caplog):
    state = _state(tmp_path, "shockwave")
    for j in range(2):
        _submit(state, j, "ResNet-18 (batch size 32)", adaptation="", total_steps=10 ** 6)
    state.store._run("UPDATE jobs SET history = '{\"shares\": [[1]]}' WHERE job_id = 0")      # hand edits
    state.store._run("UPDATE jobs SET history = '[1, 2]' WHERE job_id = 1")
    state.store.set_meta("decide_state", '{"round_ptr": "x"}')
    restarted = _state(tmp_path, "shockwave")
    restarted.register("v100", 1, "a")
    restarted.round(restarted.now() + 10)
    planner = restarted.core.decide
    assert sorted(restarted.core.jobs) == [0, 1] and planner.round_ptr == 0 and planner.origin is not None
    assert all(planner.planned[j].num_shares == 1 and planner.planned[j].samples == 0 for j in range(2))
    assert "decide state" in caplog.text and caplog.text.count("stored history") == 2
    assert {r.state for r in restarted.store.jobs()} == {"queued", "running"}


def test_the_scheduler_takes_the_planners_settings(tmp_path):
    """`hetsched scheduler --shockwave-config` as `simulate`'s: a preset or the JSON file, here with ratios of
    durations (docs/rules.md#ftf-ratio); refused for other policies and for settings that do not parse."""
    config = tmp_path / "planner.json"
    config.write_text('{"k": 10.0, "ftf_ratio": "durations"}')
    state = RuntimeState(Store(tmp_path / "s.sqlite"), "shockwave", 10.0, TABLE, shockwave_config=str(config))
    state.register("v100", 1, "a")
    assert (state.core.decide.cfg.ftf_ratio, state.core.decide.cfg.k) == ("durations", 10.0)
    with pytest.raises(HetschedError, match="Shockwave's planner only"):
        RuntimeState(Store(tmp_path / "t.sqlite"), "max_min_fairness_perf", 10.0, TABLE, shockwave_config="x.json")
    config.write_text('{"ftf_ratio": "since"}')
    with pytest.raises(HetschedError, match="ftf_ratio"):
        RuntimeState(Store(tmp_path / "u.sqlite"), "shockwave", 10.0, TABLE, shockwave_config=str(config))
