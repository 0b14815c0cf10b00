"""The runtime drives the core through its public methods: capacity changes keep history, measured rates are
per process, only leases that ran are credited, and the policy is seeded as in the simulator."""

from __future__ import annotations

import random
from dataclasses import replace
import time

import numpy as np
from runtime_helpers import RESNET

from hetsched import ClusterSpec, Job
from hetsched.core.scheduler import Scheduler
from hetsched.runtime.state import RuntimeState
from hetsched.runtime.store import Store
from hetsched.runtime.stubs import pb2
from hetsched.sim.simulator import policy_for
from hetsched.model.throughputs import load_throughputs

TABLE = load_throughputs("gavel_simulation")


def test_set_cluster_keeps_jobs_and_time_received():
    core = Scheduler(ClusterSpec.parse("v100=1"), policy_for("max_min_fairness_perf", 0), TABLE, round_s=60,
                     gpu_types=("k80", "p100", "v100"))
    for i in range(3):
        core.add_job(Job(i, 0.0, RESNET, 1, 1000))
    plan = core.plan(0.0)
    assert core.capacity.tolist() == [0, 0, 1] and len(plan.assignments) == 1
    core.credit(plan.entry, plan.gpu_type, np.zeros((len(plan.entry), 2)), np.full(len(plan.entry), 60.0))
    received = core.t.copy()
    core.set_cluster(ClusterSpec.parse("v100=1,k80=2"))
    assert core.capacity.tolist() == [2, 0, 1]
    np.testing.assert_array_equal(core.t, received)           # nothing rebuilt
    plan = core.plan(60.0)
    assert sorted(core.gpu_types[a.gpu_type] for a in plan.assignments) == ["k80", "k80", "v100"]


def test_an_unmeasured_job_type_runs_at_the_default_rate_until_measured():
    """The runtime accepts a type the table lacks (allow_unknown_type): it runs at 1 step/s, pairs with no one
    under space sharing, and a measured rate replaces the default (docs/rules.md#rates)."""
    for policy in ("max_min_fairness_perf", "max_min_fairness_packed"):
        core = Scheduler(ClusterSpec.parse("v100=1,k80=1"), policy_for(policy, 0), TABLE, round_s=60)
        core.add_job(Job(0, 0.0, "BERT (batch size 8)", 1, 720))
        core.add_job(Job(1, 0.0, RESNET, 1, 1000))
        slot = core.slot[0]
        assert core.key_row[slot] == -1 and core.tput[slot].tolist() == [1.0, 1.0]
        plan = core.plan(0.0)
        assert sorted(len(core.entries[e]) for e in plan.entry) == [1, 1]     # both run, each alone


def test_observe_rate_moves_the_entry_throughput():
    core = Scheduler(ClusterSpec.parse("v100=1"), policy_for("max_min_fairness_perf", 0), TABLE)
    core.add_job(Job(0, 0.0, RESNET, 1, 1000))
    w = core.gpu_types.index("v100")
    table_rate = core.tput[core.slot[0], w]
    core.measurements.observe_rate(0, "v100", 2 * table_rate)
    e = core.entry_of((0,))
    assert core.etput[e, w, 0] == core.tput[core.slot[0], w] == 1.5 * table_rate
    core.measurements.observe_rate(0, "v100", float("nan"))                # ignored, not stored
    assert core.tput[core.slot[0], w] == 1.5 * table_rate


LM = "LM (batch size 20)"


def _packed_core():
    core = Scheduler(ClusterSpec.parse("v100=1"), policy_for("max_min_fairness_packed", 0), TABLE, round_s=1.0,
                     min_reset_interval_s=0.0)
    core.add_job(Job(0, 0.0, RESNET, 1, 10_000))
    core.add_job(Job(1, 0.0, LM, 1, 10_000))
    return core, core.gpu_types.index("v100")


def test_pair_rates_follow_a_measured_isolated_rate_until_the_pair_is_measured():
    core, w = _packed_core()
    core.add_job(Job(2, 0.0, RESNET, 1, 10_000))

    def beside(resnet=0, lm=1):                                  # (ResNet's rate, LM's rate) when they share
        v = core.view(0.0)
        code = dict(zip(v.job_ids.tolist(), v.type_code.tolist()))
        return v.colocated[code[resnet], code[lm], w]
    table = beside().copy()
    iso = core.tput[core.slot[0], w]
    core.measurements.observe_rate(0, "v100", 9 * iso)                        # exponential average: 5 x the table's
    np.testing.assert_allclose(beside(), [5 * table[0], table[1]])          # the table's efficiency x 5
    np.testing.assert_allclose(beside(2), table)                 # the other ResNet job: not measured
    core.measurements.observe_pair_rate(0, 1, "v100", table[0])     # efficiency 1/5 the table's; averaged: 0.6
    np.testing.assert_allclose(beside(), [3 * table[0], table[1]])
    np.testing.assert_allclose(beside(2), [0.6 * table[0], table[1]])       # per job type: ResNet beside LM
    v = core.view(0.0)
    code = dict(zip(v.job_ids.tolist(), v.type_code.tolist()))
    np.testing.assert_allclose(v.colocated[code[1], code[0], w, 1], 3 * table[0])    # seen from LM's row
    core.measurements.observe_pair_rate(2, 1, "v100", 0.612 * table[0])       # within 5 %: kept, no recompute
    np.testing.assert_allclose(beside(2), [0.6 * table[0], table[1]])
    core.remove_job(0)
    core.remove_job(2)
    core.add_job(Job(3, 0.0, RESNET, 1, 10_000))                 # a measurement outlives the jobs it came from
    np.testing.assert_allclose(beside(3), [0.6 * table[0], table[1]])


def test_jobs_of_a_type_measured_alike_share_a_key():
    core, w = _packed_core()
    for i in (2, 3):
        core.add_job(Job(i, 0.0, RESNET, 1, 10_000))
    iso = core.tput[core.slot[0], w]
    core.measurements.observe_rate(0, "v100", 3 * iso)
    core.measurements.observe_rate(2, "v100", 3.02 * iso)                     # within the same 5 % band
    v = core.view(0.0)
    code = v.type_code.tolist()
    assert code[0] == code[2] != code[3] != code[1] and len(set(code)) == 3


def test_a_pair_is_still_planned_after_one_member_ran_alone_at_a_measured_rate():
    # The second job arrives after the first ran alone at 10 x its table rate. With pair rates that did not follow
    # that measurement, the pair would look slow and the jobs would take turns on the GPU.
    core, w = _packed_core()
    core.remove_job(1)
    core.plan(0.0)
    measured = 10 * core.tput[core.slot[0], w]
    for _ in range(10):                                          # reports while it runs: the average gets there
        core.measurements.observe_rate(0, "v100", measured)
    core.add_job(Job(1, 1.0, LM, 1, 10_000))
    plans = [core.plan(float(t)) for t in range(1, 5)]
    assert any(a.job_ids == (0, 1) for p in plans for a in p.assignments)


def _state(tmp_path, policy="max_min_fairness_perf", seed=0):
    return RuntimeState(Store(tmp_path / "s.sqlite"), policy, 10.0, TABLE, seed=seed)


def _submit(state, job_id, total_steps=10_000):
    return state.submit(pb2.SubmitJobRequest(job_id=job_id, job_type=RESNET, scale_factor=1,
                                             total_steps=total_steps, priority_weight=1, command="emulated"))


def test_workers_joining_keep_the_core_and_its_seed(tmp_path):
    state = _state(tmp_path, "gavel_fifo", seed=7)
    state.register("v100", 1, "a")
    core = state.core
    assert core.policy._rng.getstate() == random.Random(7).getstate()       # seeded as in the simulator
    for i in range(3):
        _submit(state, i)
    state.round(state.now() + 10)
    state.register("k80", 2, "b")
    assert state.core is core and core.capacity.sum() == 3
    state.round(state.now() + 10)
    leased = {lease.job_id for info in state.workers.values() for lease in info.to_start}
    assert leased == {0, 1, 2}


def test_measured_rate_counts_this_process_only_and_unstarted_leases_get_no_time(tmp_path):
    state = _state(tmp_path)
    worker_id, session = state.register("v100", 1, "a")
    _submit(state, 0)
    state.round(state.now() + 10)
    core, credited = state.core, []
    real_credit = core.credit
    core.credit = lambda e, w, steps, ran: credited.append(ran.tolist()) or real_credit(e, w, steps, ran)
    state.round(state.now() + 10)                  # the lease was never handed out: no time received
    assert credited == [[0.0]]
    lease = state.workers[worker_id].to_start[0]
    state.heartbeat(pb2.HeartbeatRequest(worker_id=worker_id, session=session))
    w = core.gpu_types.index("v100")
    table_rate = core.tput[core.slot[0], w]
    # A resumed process: 5,000 steps in all, 2 * table_rate of them in its one second.
    state.update_lease(pb2.UpdateLeaseRequest(job_id=0, lease_id=lease.lease_id, steps_done=5000,
                                              steps_checkpointed=5000, seconds=1.0,
                                              steps_run=int(2 * table_rate)), lease.lease_token)
    expected = 0.5 * int(2 * table_rate) + 0.5 * table_rate          # steps_run / seconds, not 5,000 / 1
    assert abs(core.tput[core.slot[0], w] - expected) < 1e-9
    state.round(state.now() + 10)
    assert credited[-1][0] > 0                                             # now it ran: credited
    assert core.remaining[core.slot[0]] == 5000


def test_a_moved_job_is_leased_in_the_same_round_and_starts_once_its_old_process_is_gone(tmp_path):
    """A job placed on another GPU at a boundary gets its new lease at once (not a round later); the lease is
    handed out when the old process, which may still store its last checkpoint, has exited, and starts from
    that checkpoint."""
    from dataclasses import replace
    state = _state(tmp_path)
    ids = [state.register("v100", 1, name) for name in ("a", "b")]
    _submit(state, 0)
    state.round(state.now() + 10)
    (first, first_s), = [(w, s) for w, s in ids if state.workers[w].to_start]
    (other, other_s), = [(w, s) for w, s in ids if w != first]
    old = state.heartbeat(pb2.HeartbeatRequest(worker_id=first, session=first_s)).start[0]
    state.heartbeat(pb2.HeartbeatRequest(worker_id=first, session=first_s,
                                         jobs=[pb2.JobState(job_id=0, lease_id=old.lease_id, running=True)]))
    core, real_plan = state.core, state.core.plan
    gpu = next(g for g, (w, _) in state.gpu_owner.items() if w == other)

    def moved(now, **kw):
        plan = real_plan(now, **kw)
        plan.assignments = [replace(a, gpus=(gpu,)) for a in plan.assignments]
        return plan
    core.plan = moved
    state.round(state.now() + 10)
    new = state.leases[0]
    assert new.lease_id != old.lease_id and new.previous.lease_id == old.lease_id
    held = state.heartbeat(pb2.HeartbeatRequest(worker_id=other, session=other_s))
    assert not held.start and new.started_at is None          # the old process still runs
    resp = state.update_lease(pb2.UpdateLeaseRequest(job_id=0, lease_id=old.lease_id, steps_done=700,
                                                     steps_checkpointed=700, seconds=5.0, steps_run=700),
                              old.lease_token)
    assert not resp.keep_running and state.store.job(0).steps_done == 700
    state.heartbeat(pb2.HeartbeatRequest(worker_id=first, session=first_s))      # it exited
    start = state.heartbeat(pb2.HeartbeatRequest(worker_id=other, session=other_s)).start
    assert [m.lease_id for m in start] == [new.lease_id] and start[0].steps_done == 700
    assert new.started_at is not None and new.resumed
    # Its first steps: a restart, whose cost is the lease's wall time before them (GetStatus.mean_restart_s).
    started = new.started_at
    state.update_lease(pb2.UpdateLeaseRequest(job_id=0, lease_id=new.lease_id, steps_done=710, steps_checkpointed=700,
                                              seconds=0.0, steps_run=10), new.token)
    status = state.status(pb2.StatusRequest())
    assert status.restarts == 1 and 0.0 <= status.mean_restart_s <= state.now() - started
    # Both leases stepped: two lease starts, each measured from its round's plan (GetStatus.mean_lease_start_s),
    # the new one's including the wait for the old process.
    assert status.lease_starts == 2 and started - new.issued_at <= 2 * status.mean_lease_start_s
    assert status.mean_lease_start_s <= state.now() - state.leases[0].previous.issued_at


def _paired_after_running_alone(tmp_path):
    """Job 0 runs alone on a V100 at 10 x its table rate for 8 s; then job 1 arrives and job 0's lease is extended
    into a pair with it. Returns the state, job 0's lease, `report(steps_run, seconds)` and its steps so far."""
    state = _state(tmp_path, "max_min_fairness_packed")
    worker_id, session = state.register("v100", 1, "a")
    _submit(state, 0)
    state.round(state.now() + 10)
    lease = state.heartbeat(pb2.HeartbeatRequest(worker_id=worker_id, session=session)).start[0]
    alone = 10 * state.core.tput[state.core.slot[0], state.core.gpu_types.index("v100")]

    def report(steps_run, seconds):
        state.update_lease(pb2.UpdateLeaseRequest(job_id=0, lease_id=lease.lease_id, steps_done=steps_run,
                                                  steps_checkpointed=0, seconds=seconds, steps_run=steps_run),
                           lease.lease_token)
    for second in range(1, 9):
        report(int(alone * second), float(second))
    _submit(state, 1)
    state.round(state.now() + 10)
    return state, lease, report, int(alone * 8)


def test_a_lease_extended_into_a_pair_measures_the_pair_from_its_next_update(tmp_path):
    state, lease, report, steps = _paired_after_running_alone(tmp_path)
    core, w = state.core, state.core.gpu_types.index("v100")
    info = state.leases[0]
    assert info.lease_id == lease.lease_id and info.partner == 1 and info.rate_from is None   # extended
    assert state.leases[1].partner == 0
    report(steps + 100, 9.0)                                     # measures from here on
    assert not core.measurements._pair_efficiency and info.rate_from == (steps + 100, 9.0)
    row, isolated = int(core.key_row[core.slot[0]]), core.tput[core.slot[0], w]
    report(steps + 300, 11.0)                                    # 100 steps/s beside job 1
    table = core.measurements._table_efficiency(row, row, w)
    assert core.measurements._pair_efficiency[(row, row)][w] == 0.5 * 100.0 / isolated + 0.5 * table
    assert core.tput[core.slot[0], w] == isolated                # not taken as its rate alone


def test_a_restart_keeps_the_rates_and_pair_efficiencies_measurements_moved(tmp_path):
    """docs/rules.md#runtime-restart: after a restart the core plans with the measured rates, not the table's again
    (before, a restarted scheduler planned with the table's until its jobs were measured anew)."""
    state, lease, report, steps = _paired_after_running_alone(tmp_path)       # job 0's rate stored at the round
    core, w = state.core, state.core.gpu_types.index("v100")
    report(steps + 100, 9.0)
    report(steps + 300, 11.0)                                    # 100 steps/s beside job 1
    row, table_rate = int(core.key_row[core.slot[0]]), core.tput[core.slot[1], w]
    measured, efficiency = core.tput[core.slot[0], w], core.measurements._pair_efficiency[(row, row)][w]
    assert measured > 5 * table_rate and np.isfinite(efficiency)
    state.round(state.now() + 10)                                # the efficiency stored

    restarted = _state(tmp_path, "max_min_fairness_packed")
    restarted.register("v100", 1, "a")
    restarted.round(restarted.now() + 10)                        # the jobs join the new core
    again = restarted.core
    assert again.tput[again.slot[0], w] == measured and again.tput[again.slot[1], w] == table_rate
    assert again.measurements._pair_efficiency[(row, row)][w] == efficiency
    assert again.measurements.measured_rates(0) == (RESNET, {"v100": measured})
    again.measurements.restore_rates(1, "LM (batch size 5)", {"v100": 1.0})   # rates of another batch size: not taken
    assert again.tput[again.slot[1], w] == table_rate


def test_unreadable_stored_rates_cost_their_rates_not_the_job_or_the_worker(tmp_path, caplog):
    state = _state(tmp_path)
    _submit(state, 0)
    state.store._run("UPDATE jobs SET rates = '{\"job_type\": 3' WHERE job_id = 0")     # a hand edit
    state.store.set_meta("pair_efficiencies", '[["a", "b"]]')
    restarted = _state(tmp_path)
    restarted.register("v100", 1, "a")
    restarted.round(restarted.now() + 10)
    core = restarted.core
    assert 0 in core.jobs and core.tput[core.slot[0], core.gpu_types.index("v100")] == TABLE.get(RESNET, 1, "v100")
    assert "stored rates" in caplog.text and restarted.store.job(0).state != "failed"
    assert "stored pair efficiencies are unreadable" in caplog.text and not core.measurements._pair_efficiency


def test_a_late_plan_moves_its_leases_to_a_later_boundary_and_its_lock_time_is_no_silence(tmp_path):
    """docs/rules.md#late-plan: the grid is kept, the leases get at least half a round, and the time the round held
    the lock is added to every worker's last heartbeat."""
    state = _state(tmp_path)                                   # 10-s rounds
    worker_id, _ = state.register("v100", 1, "a")
    _submit(state, 0)
    seen = state.workers[worker_id].last_seen
    plan = state.core.plan

    def slow_plan(*args, **kwargs):
        time.sleep(0.2)
        return plan(*args, **kwargs)
    state.core.plan = slow_plan
    asked = state.now() - 13.0                                 # 13 s already past: 2 rounds later leaves 7 s
    assert state.round(asked) == asked + 20.0
    assert state.workers[worker_id].to_start[0].deadline_s == asked + 20.0
    assert state.workers[worker_id].last_seen - seen >= 0.2
    on_time = state.now() + 6.0                                # more than half a round left: kept
    assert state.round(on_time) == on_time


def test_a_lease_that_ended_a_round_ago_is_not_extended_when_its_job_comes_back(tmp_path):
    """One GPU, two jobs taking turns. A job planned again after a round off gets a new lease, even on the same
    GPU: its old lease ended, and its process's clean exit, reported late, is not a failed attempt."""
    state = _state(tmp_path)
    worker, session = state.register("v100", 1, "a")
    for job_id in (0, 1):
        _submit(state, job_id)
    leases, off = {}, False
    for _ in range(40):            # the rounds' credit is real time: on a busy machine the turns come later
        state.round(state.now() + 10)
        for m in state.heartbeat(pb2.HeartbeatRequest(worker_id=worker, session=session)).start:
            leases.setdefault(m.job_id, []).append(m.lease_id)
        off = off or 0 not in {j for ids, _, _ in state.plan for j in ids}
        if off and len(leases[0]) > 1:
            break
    assert off and len(leases[0]) == 2, f"job 0 came back on its old lease {leases[0]}"   # it was extended
    first, second = leases[0]
    assert state.leases[0].lease_id == second
    state.report_exit(pb2.ExitReport(worker_id=worker, session=session, job_id=0, lease_id=first, exit_code=0))
    assert state.active[0].attempts == 0 and state.leases[0].lease_id == second


def test_a_lease_waits_for_the_ended_lease_on_its_gpu_and_stops_it_when_it_hangs(tmp_path, monkeypatch):
    """Issue 72, Low: at a hand-over two jobs' processes were alive on one GPU for up to 11 s (the new lease
    started while the ended one still checkpointed). The new lease is handed out once the ended lease's process
    is gone; one that hangs past HANDOVER_S is stopped."""
    from hetsched.runtime import worker_calls

    state = _state(tmp_path, "gavel_fifo")
    worker_id, session = state.register("v100", 1, "a")
    for i in range(2):
        _submit(state, i)
    state.round(state.now() + 10)
    beat = lambda *running: state.heartbeat(pb2.HeartbeatRequest(                           # noqa: E731
        worker_id=worker_id, session=session,
        jobs=[pb2.JobState(job_id=j, lease_id=lease_id, running=True) for j, lease_id in running]))
    (first,) = beat().start
    beat((first.job_id, first.lease_id))
    other = 1 - first.job_id
    core, real_plan = state.core, state.core.plan

    def the_other_job(now, **kw):                      # FIFO would keep the first job: plan the other one instead
        plan = real_plan(now, **kw)
        plan.assignments = [replace(a, job_ids=(other,)) for a in plan.assignments]
        return plan
    core.plan = the_other_job
    state.round(state.now() + 10)
    assert state.leases[other].parts == ((worker_id, 0),)
    answer = beat((first.job_id, first.lease_id))        # the ended lease's process still runs on GPU 0
    assert list(answer.start) == [] and list(answer.stop) == []
    monkeypatch.setattr(worker_calls, "HANDOVER_S", 0.0)
    time.sleep(0.01)
    answer = beat((first.job_id, first.lease_id))        # it hangs: stopped, and still nothing starts beside it
    assert list(answer.start) == [] and list(answer.stop) == [first.job_id]
    (started,) = beat().start                            # gone: the new lease is handed out
    assert started.job_id == other


def test_a_stale_lease_cannot_raise_durable_progress(tmp_path):
    """Issue 72, Low: an old lease token (kept for a process on its way out) could still raise the job's durable
    steps through UpdateLease, once the job's next lease had started."""
    state = _state(tmp_path)
    worker_id, session = state.register("v100", 1, "a")
    _submit(state, 0)
    state.round(state.now() + 10)
    old = state.heartbeat(pb2.HeartbeatRequest(worker_id=worker_id, session=session)).start[0]
    with state.lock:
        row = state.active[0]
        state._lease(row, state.leases[0].parts, "v100", state.now() + 30, state.now(), -1)
        state.leases[0].started_at = state.now()                  # the next lease has started
    state.update_lease(pb2.UpdateLeaseRequest(job_id=0, lease_id=old.lease_id, steps_done=9000,
                                              steps_checkpointed=9000, seconds=1.0, steps_run=9000), old.lease_token)
    assert state.active[0].steps_done == 0 and state.store.job(0).steps_done == 0
    new = state.leases[0]
    state.update_lease(pb2.UpdateLeaseRequest(job_id=0, lease_id=new.lease_id, steps_done=500,
                                              steps_checkpointed=400, seconds=1.0, steps_run=500), new.token)
    assert state.active[0].steps_done == 400


def test_another_ranks_clean_exit_before_rank_0s_last_update_is_not_a_failed_attempt(tmp_path):
    """Rank 1 stops with rank 0 and may exit, and have its exit reported, before rank 0's last update says the
    job finished: that clean exit counted as a failed attempt, and the finished job ran again."""
    state = _state(tmp_path)
    ids = [state.register("v100", 1, name) for name in ("a", "b")]
    state.submit(pb2.SubmitJobRequest(job_id=0, job_type=RESNET, scale_factor=2, total_steps=100,
                                      priority_weight=1, command="emulated"))
    state.round(state.now() + 10)
    leases = {}
    for worker_id, session in ids:
        for lease in state.heartbeat(pb2.HeartbeatRequest(worker_id=worker_id, session=session)).start:
            leases[lease.rank] = (worker_id, session, lease)
    assert sorted(leases) == [0, 1]
    worker_id, session, lease = leases[1]
    state.report_exit(pb2.ExitReport(worker_id=worker_id, session=session, job_id=0, lease_id=lease.lease_id,
                                     exit_code=0, rank=1))
    assert state.active[0].attempts == 0 and 0 in state.leases
    worker_id, session, lease = leases[0]
    state.update_lease(pb2.UpdateLeaseRequest(job_id=0, lease_id=lease.lease_id, steps_done=100,
                                              steps_checkpointed=100, seconds=1.0, steps_run=100, finished=True),
                       lease.lease_token)
    state.report_exit(pb2.ExitReport(worker_id=worker_id, session=session, job_id=0, lease_id=lease.lease_id,
                                     exit_code=0, rank=0))
    row = state.store.job(0)
    assert row.state == "completed" and row.attempts == 0


def test_status_names_a_running_jobs_gpu_type_workers_and_durable_steps(tmp_path):
    state = _state(tmp_path)
    worker, session = state.register("v100", 1, "a")
    _submit(state, 0)
    state.round(state.now() + 10)
    state.heartbeat(pb2.HeartbeatRequest(worker_id=worker, session=session))
    (job,) = state.status(pb2.StatusRequest()).jobs
    assert (job.state, job.gpu_type, job.workers, job.durable_steps) == ("running", "v100", worker, 0)
