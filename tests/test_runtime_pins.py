"""A trace's pinned GPU types and SLOs reach the runtime's core (docs/rules.md#runtime-jobs): `hetsched submit`
dropped both, so an openb pod pinned to V100s got leases on any type and the SLO policy saw no deadline."""

from __future__ import annotations

import pytest

from hetsched import Job
from hetsched.model.throughputs import load_throughputs
from hetsched.runtime.launch import submit_request
from hetsched.runtime.state import RuntimeState
from hetsched.runtime.store import Store
from hetsched.runtime.validate import InvalidInput

TABLE = load_throughputs("gavel_simulation")
RESNET = "ResNet-18 (batch size 32)"


def _leased_types(state) -> dict[int, str]:
    out = {}
    for info in state.workers.values():
        out.update({m.job_id: info.gpu_type for m in info.to_start})
        info.to_start.clear()
    return out


def test_pins_and_slos_survive_submit_storage_admission_and_a_restart(tmp_path):
    state = RuntimeState(Store(tmp_path / "s.sqlite"), "max_min_fairness_perf", 60.0, TABLE)
    state.register("v100", 4, "fast")
    state.register("k80", 4, "slow")
    jobs = [Job(i, 0.0, RESNET, 1, 10**6, command="emulated", pinned_gpu_types="k80") for i in range(3)]
    jobs.append(Job(3, 0.0, RESNET, 1, 10**6, command="emulated", slo_factor=2.0, duration_s=5000.0))
    for job in jobs:
        state.submit(submit_request(job, job.job_id))
    seen = {}
    for _ in range(3):                          # a few rounds: the pinned jobs never run on the V100s
        state.round(state.now())
        for job_id, gpu_type in _leased_types(state).items():
            seen.setdefault(job_id, set()).add(gpu_type)
    assert [seen.get(i) for i in range(3)] == [{"k80"}] * 3, seen
    core = state.core
    assert [core.jobs[i].allowed_gpu_types for i in range(4)] == [("k80",)] * 3 + [()]
    slo = core.jobs[3]
    assert slo.deadline_s == pytest.approx(2.0 * 5000.0 + slo.arrival_time_s)
    again = RuntimeState(Store(tmp_path / "s.sqlite"), "max_min_fairness_perf", 60.0, TABLE)
    again.register("v100", 4, "fast")
    again.round(again.now())
    assert [again.core.jobs[i].pinned_gpu_types for i in range(4)] == ["k80"] * 3 + [""]
    assert (again.core.jobs[3].slo_factor, again.core.jobs[3].duration_s) == (2.0, 5000.0)


@pytest.mark.parametrize("change, message", [
    (dict(pinned_gpu_types="h100"), r"pinned_gpu_types: \['h100'\] not in the throughput table"),
    (dict(slo_factor=2.0), "slo_factor: needs duration_s"),
])
def test_pins_the_table_lacks_and_slos_without_a_duration_are_refused_at_submit(tmp_path, change, message):
    state = RuntimeState(Store(tmp_path / "s.sqlite"), "max_min_fairness_perf", 60.0, TABLE)
    with pytest.raises(InvalidInput, match=message):
        state.submit(submit_request(Job(0, 0.0, RESNET, 1, 1000, command="emulated", **change), 0))
    assert Store(tmp_path / "s.sqlite").jobs() == []


def test_synergys_rounds_on_the_runtime_run_a_pinned_job_only_on_its_type(tmp_path):
    """The runtime's core has a column per table type, so the check against the core's columns passed a k80 pin
    and Synergy's rounds leased the job a V100."""
    state = RuntimeState(Store(tmp_path / "s.sqlite"), "FIFO+fair", 60.0, TABLE)
    state.register("v100", 4, "w", cpu_cores=16, mem_gb=200)
    for job_id, pin in ((0, "k80"), (1, "k80|v100")):
        state.submit(submit_request(Job(job_id, 0.0, "res18", 1, 1000, command="emulated", pinned_gpu_types=pin),
                                    job_id))
    state.round(state.now())
    assert set(_leased_types(state)) == {1}
    rows = {r.job_id: r for r in Store(tmp_path / "s.sqlite").jobs()}
    assert rows[0].state == "failed" and "pinned to GPU types ['k80'], none of which" in rows[0].log_tail


def test_measured_pair_rates_keep_a_pinned_jobs_types_closed():
    """Once a pair's efficiency was measured (the runtime's rates), the policy's view gave a K80-pinned job's
    partner a rate beside it on V100s (docs/rules.md#pins)."""
    from hetsched import ClusterSpec
    from hetsched.core.scheduler import Scheduler
    from hetsched.sim.simulator import policy_for

    lm = "LM (batch size 20)"
    core = Scheduler(ClusterSpec.parse("v100=2,k80=2"), policy_for("max_min_fairness_packed", 0), TABLE, round_s=60)
    core.add_job(Job(0, 0.0, RESNET, 1, 10**6, pinned_gpu_types="k80"))
    core.add_job(Job(1, 0.0, RESNET, 1, 10**6))
    core.add_job(Job(2, 0.0, lm, 1, 10**6))
    w = core.gpu_types.index("v100")
    rate = core.tput[core.slot[1], w]
    core.measurements.observe_rate(1, "v100", 1.2 * rate)
    core.measurements.observe_pair_rate(1, 2, "v100", 0.5 * rate)
    core.measurements.observe_pair_rate(2, 1, "v100", 0.5 * core.tput[core.slot[2], w])
    view = core.view(0.0)
    code = view.type_code
    assert core.measurements.rates_measured and len(set(code.tolist())) == 3
    assert view.colocated[code[0], code[2], w].tolist() == [0.0, 0.0]
    assert view.colocated[code[2], code[0], w].tolist() == [0.0, 0.0]
    assert (view.colocated[code[1], code[2], w] > 0).all()          # the unpinned job of the same type pairs
