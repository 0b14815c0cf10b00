"""Elastic jobs on the runtime (docs/rules.md#elastic-runtime): Sia decides each round's GPU type and count per job
through the one `Scheduler`, the job's GPUs are named for its lease, and a job whose count changes restarts from its
checkpoint with the new world size."""

from __future__ import annotations

import re
import time

import pytest

from machine import scaled

from hetsched import ClusterSpec, Job
from hetsched.errors import HetschedError
from hetsched.model.throughputs import load_throughputs
from hetsched.runtime.launch import launch_local_cluster
from hetsched.runtime.state import RuntimeState
from hetsched.runtime.store import Store
from hetsched.runtime.stubs import pb2
from hetsched.runtime.validate import InvalidInput
from hetsched.sim.simulator import simulate

TABLE = load_throughputs("gavel_simulation")


def _state(tmp_path, policy="sia"):
    return RuntimeState(Store(tmp_path / "s.sqlite"), policy, 60.0, TABLE)


def _submit(state, job_id, app="cifar10", steps=1000, **extra):
    return state.submit(pb2.SubmitJobRequest(job_id=job_id, job_type=app, scale_factor=1, total_steps=steps,
                                             priority_weight=1, command="emulated", **extra))


def _round(state, steps=100):
    """Plan a round, then let every lease run half of it and report `steps` more; returns the leases handed out
    as (job, rank, world size, worker, local GPU)."""
    state.round(state.now() + 60)
    handed = sorted((m.job_id, m.rank, m.world_size, w, tuple(m.local_gpus)) for w, info in state.workers.items()
                    for m in info.to_start)
    for info in state.workers.values():
        info.to_start = []
    for job_id, lease in state.leases.items():
        lease.started_at = state.now() - 30
        state.live_steps[job_id] = state.live_steps.get(job_id, 0) + steps
    state.epoch -= 60                                     # a round passes on the scheduler's clock
    return handed


def test_a_lone_adaptive_job_grows_on_new_gpus_and_keeps_them_while_its_allocation_stands(tmp_path):
    state = _state(tmp_path)
    for name in "ab":
        state.register("t4", 4, name)
    _submit(state, 0)
    sizes = []
    for _ in range(4):
        handed = _round(state)
        if handed:
            sizes.append(handed[0][2])
            gpus = [(w, g) for _, _, _, w, g in handed]
            assert len(gpus) == len(set(gpus)) == handed[0][2]            # one GPU per rank, none twice
            assert [r for _, r, _, _, _ in handed] == list(range(len(handed)))
        else:                                                               # unchanged: the lease goes on
            assert len(state.leases[0].parts) == sizes[-1]
    assert sizes[:3] == [1, 2, 4], sizes          # Sia's bootstrap: one GPU, then at most twice what it has run
    job = state.core.decide.elastic[0]
    assert job.restarts >= 2 and {replicas for _, replicas, _ in job.profiles["t4"]} >= {1, 2, 4}
    assert state.core.remaining[state.core.slot[0]] == 1000 - 100 * 3      # credited as the next round is planned


def test_elastic_refusals_name_what_would_work(tmp_path):
    state = _state(tmp_path)
    with pytest.raises(InvalidInput, match=r"'k80' is not in .*'elastic applications'; allowed: .*'t4'"):
        state.register("k80", 2, "old")
    state.register("t4", 4, "a")
    with pytest.raises(InvalidInput, match="differ in GPU count"):
        state.register("t4", 2, "b")
    with pytest.raises(InvalidInput, match="cifar10"):                     # the applications it does run
        _submit(state, 1, app="ResNet-18 (batch size 32)")
    with pytest.raises(InvalidInput, match=r"batch size 99999 is outside cifar10's profiled range"):
        _submit(state, 4, app="cifar10 (batch size 99999)")                # refused at submission, not later
    _submit(state, 2, pinned_gpu_types="t4")
    state.register("rtx", 8, "c")
    _submit(state, 3, app="gpt_pmp")                                       # measured on a100 and rtx only
    state.round(state.now() + 60)
    failed = {r.job_id: r.log_tail for r in state.store.jobs(("failed",))}
    assert "chooses each job's GPU type itself" in failed[2]
    assert "no measurements on t4" in failed[3]
    with pytest.raises(HetschedError, match="'res18' is not a measured application; elastic jobs run bert"):
        simulate([Job(0, 0.0, "res18", 1, 10)], ClusterSpec.load("v100=2"), "Sia")
    with pytest.raises(HetschedError, match=r"batch size 99999 is outside cifar10's profiled range \[\d+, \d+\]"):
        simulate([Job(0, 0.0, "cifar10 (batch size 99999)", 1, 10)], ClusterSpec.load("v100=2"), "Sia")


def test_a_restarted_runtime_gives_each_job_back_what_its_model_learnt(tmp_path):
    state = _state(tmp_path)
    state.register("t4", 4, "a")
    _submit(state, 0)
    for _ in range(3):
        _round(state)
    state.round(state.now() + 60)                        # credits the third round and stores what it taught
    learnt = state.core.decide.elastic[0]
    assert len(learnt.profiles["t4"]) >= 2

    again = _state(tmp_path)
    again.register("t4", 4, "a")
    again.round(again.now() + 60)
    job = again.core.decide.elastic[0]
    assert job.profiles == learnt.profiles
    assert job.restarts == learnt.restarts + 1              # placed again after the scheduler's restart: one more
    assert job.params["t4"].tolist() == learnt.params["t4"].tolist()


def test_an_adaptive_job_changes_gpu_count_twice_on_emulated_workers_and_every_step_is_accounted(tmp_path):
    """Two emulated 4-GPU workers under Sia: a lone job starts on one GPU and grows as its model learns; each
    change is a new lease of a new world size that starts from the durable steps of the last one. The emulated job
    runs at the measured traces' rate for its allocation, at a time scale of 120 (about 13 s for cifar10)."""
    with launch_local_cluster("t4=8", tmp_path, policy="sia", round_s=1.0, emulate=True, gpus_per_worker=4,
                              time_scale=120.0) as c:         # 120 s of training a round (R86a)
        c.submit([Job(0, 0.0, "cifar10", 1, 1500, command="emulated")])
        final = c.wait(scaled(120))
    row = final.iloc[0]
    assert (row.state, row.steps_done, row.durable_steps, row.attempts) == ("completed", 1500, 1500, 0), row
    log = (tmp_path / "scheduler.log").read_text()
    sizes = [int(n) for n in re.findall(r"lease job=0 .*ranks=(\d+)", log)]
    changes = sum(a != b for a, b in zip(sizes, sizes[1:]))
    assert sizes[0] == 1 and changes >= 2, sizes
    # Every lease after the first resumed from what the one before it had made durable, never from scratch.
    restarts = re.findall(r"restart job=0 ", log)
    assert len(restarts) >= 2 and "failed" not in final["state"].tolist()


@pytest.mark.parametrize("policy", ["pollux", "gavel+tj", "Sia"])
def test_each_elastic_system_leases_disjoint_gpus_on_mixed_types(tmp_path, policy):
    """Four jobs on a 4-GPU t4 server and an 8-GPU rtx server: every round, every job runs, no GPU is leased twice,
    and a lease's GPUs are all of the type its allocation names."""
    state = _state(tmp_path, policy)
    state.register("t4", 4, "a")
    state.register("rtx", 8, "b")
    for j, app in enumerate(["cifar10", "bert", "imagenet", "ncf"]):
        state.submit(pb2.SubmitJobRequest(job_id=j, job_type=app, scale_factor=2, total_steps=1000, priority_weight=1,
                                          command="emulated"))
    kinds = {w: info.gpu_type for w, info in state.workers.items()}
    for _ in range(4):
        _round(state)
        leases = state.leases
        assert sorted(leases) == [0, 1, 2, 3]
        held = [part for lease in leases.values() for part in lease.parts]
        assert len(held) == len(set(held))
        assert all(kinds[w] == lease.gpu_type for lease in leases.values() for w, _ in lease.parts)
    if policy == "gavel+tj":                               # rigid: the trace's GPU count, always
        assert {len(lease.parts) for lease in state.leases.values()} == {2}


def test_elastic_jobs_given_to_simulate_run_in_the_one_loop_as_a_workload_table_does():
    """`simulate()` with jobs of the applications (`cifar10 (batch size 128)`: the trace's batch) and an elastic
    name runs the same stage in the same loop as `hetsched elastic` on the workload table: each job's JCT and
    GPU-hours, to the bit (Gavel+TJ on helios-1, 160 jobs on the paper's 64-GPU cluster)."""
    from hetsched.sim.elastic import run_workload
    from hetsched.decide.elastic.workloads import load_workload

    frame = load_workload("helios-1").sort_values("submit_s", kind="stable").reset_index(drop=True)
    jobs = [Job(i, float(r.submit_s), f"{r.app} (batch size {r.batch_size})", int(r.num_replicas), 1.0)
            for i, r in enumerate(frame.itertuples())]
    result = simulate(jobs, ClusterSpec.load("6x4/8/64@t4+3x8/16/128@rtx+2x8/16/128@a100"), "gavel+tj")
    table = run_workload("helios-1", "gavel+tj").jobs.set_index("name")
    assert len(result.jobs) == len(table) == 160
    for i, name in enumerate(frame["name"]):
        rec = result.jobs[i]
        assert rec.jct_s == table.at[name, "jct_s"]
        assert sum(rec.gpu_seconds.values()) / 3600 == pytest.approx(table.at[name, "gpu_hours"], rel=1e-12)



def test_emulated_workers_without_overheads_finish_each_job_when_the_simulator_does(tmp_path):
    """R86a: an emulated elastic job runs each lease at the rate the measured traces give its allocation, after its
    application's restore. Workers that start every lease at once and report exactly that (no runtime overhead)
    finish time-scaled jobs within a round of the simulator at the same time scale, GPU counts changing. A restore
    longer than a round is waited out whole (it once ended after one round and the job ran at the worker's own
    rate: bert finished in 140 s instead of about 2,000 at 60-s rounds)."""
    k, round_s, total = 16.0, 3.75, 10_000
    apps = {0: "cifar10", 1: "ncf", 2: "bert"}         # bert's restore, 120 s, spans two rounds of 60
    state = RuntimeState(Store(tmp_path / "s.sqlite"), "sia", round_s, TABLE, time_scale=k)
    for name in "ab":
        state.register("t4", 4, name)
    for job_id, app in apps.items():
        _submit(state, job_id, app=app, steps=total)
    state.epoch -= round_s          # submitted at 0, the first decision one round in: the simulator's jobs at round_s
    done, wait, finish, sizes = dict.fromkeys(apps, 0.0), dict.fromkeys(apps, 0.0), {}, set()
    for r in range(1, 100):
        state.round(state.now() + round_s)
        new = {m.job_id: m for info in state.workers.values() for m in info.to_start if m.rank == 0}
        sizes |= {m.world_size for m in new.values()}
        assert all(m.emulated_steps_per_s > 0 for m in new.values())     # 0 would mean the worker's own rate
        for info in state.workers.values():
            info.to_start = []
        for job_id, lease in list(state.leases.items()):
            if lease.deadline <= state.now():               # not planned: it ends at this boundary
                continue
            m = new.get(job_id)
            if m is not None:                              # a new lease: its restore first, however long
                rate, wait[job_id] = m.emulated_steps_per_s, m.emulated_delay_s
            else:
                rate = state.emulation(job_id, done[job_id], False)[0]
            delay, wait[job_id] = min(wait[job_id], round_s), max(wait[job_id] - round_s, 0.0)
            lease.started_at = state.now()
            if done[job_id] + rate * (round_s - delay) >= total:         # finishes in this round: reported done
                finish[job_id] = r * round_s + delay + (total - done[job_id]) / rate
                state.live_steps[job_id] = total
                state.finished_flag.add(job_id)
                worker = state.workers[lease.parts[0][0]]
                state.report_exit(pb2.ExitReport(worker_id=worker.worker_id, job_id=job_id, lease_id=lease.lease_id,
                                                 exit_code=0, session=worker.session, rank=0))
                continue
            done[job_id] += rate * max(round_s - delay, 0.0)
            state.live_steps[job_id] = state.active[job_id].steps_done = int(done[job_id])
        if len(finish) == len(apps):
            break
        state.epoch -= round_s
    sim = simulate([Job(j, round_s, app, 1, total) for j, app in apps.items()], ClusterSpec.load("2x4/8/64@t4"), "sia",
                   round_s=round_s, time_scale=k).jobs_frame().set_index("job_id")["finish_time_s"]
    assert sorted(finish) == [0, 1, 2] and len(sizes) > 2, (finish, sizes)      # all finished; counts changed
    for job_id in apps:
        assert abs(finish[job_id] - sim[job_id]) <= round_s, (job_id, finish[job_id], sim[job_id])


def test_a_rank_handed_out_after_its_sibling_is_listed_is_not_taken_for_lost(tmp_path):
    """A lease's ranks on one worker can be handed out in different heartbeats (one waits for a GPU another job's
    ended lease still holds). The worker then already lists the job under that lease; the later rank's hand-out
    must not wait for the job to appear anew (it once did, and after the worker timeout the lease was declared
    lost and the job lost an attempt: 1 of 20 jobs in a 60-s-round Sia run)."""
    state = _state(tmp_path)
    worker, session = state.register("t4", 4, "a")
    _submit(state, 0, app="cifar10")
    state.round(state.now() + 60)
    lease = state.leases[0]
    beat = lambda jobs: state.heartbeat(pb2.HeartbeatRequest(   # noqa: E731
        worker_id=worker, session=session,
        jobs=[pb2.JobState(job_id=j, lease_id=lease_id, running=True) for j, lease_id in jobs]))
    assert [m.job_id for m in beat([]).start] == [0]
    beat([(0, lease.lease_id)])                                  # the worker lists it
    # another rank of the same lease is handed out now (as when it had waited for its GPU)
    msg = pb2.Lease(lease_id=lease.lease_id, job_id=0, job_type="cifar10", rank=1, world_size=2, local_gpus=[1])
    state.workers[worker].to_start.append(msg)
    assert [m.rank for m in beat([(0, lease.lease_id)]).start] == [1]
    state.worker_timeout_s = 0.0                                 # any lease still waiting to be listed is overdue
    time.sleep(0.01)
    beat([(0, lease.lease_id)])
    assert state.active[0].attempts == 0 and state.leases.get(0) is lease
