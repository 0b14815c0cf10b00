"""The one Scheduler calls its round rules (docs/architecture.md#stages): Gavel's micro-task rounds (`TaskRounds`)
or a whole-round stage (`RoundStage`), never a branch of its own. Swapping the round rules for another
implementation is seen in every call the simulator's loop makes."""

from __future__ import annotations

import numpy as np

from hetsched.select.priority import PrioritySelect
from hetsched.rounds.tasks import TaskRounds
from hetsched.model.cluster import ClusterSpec
from hetsched.sim.simulator import RoundSimulation
from hetsched.traces import GavelGenerator


class Recording(TaskRounds):
    """Gavel's rounds, each call recorded."""

    def __init__(self, sched):
        super().__init__(sched)
        self.calls: list[str] = []

    def add_job(self, job, remaining_steps):
        self.calls.append("add_job")
        super().add_job(job, remaining_steps)

    def remove_job(self, job_id):
        self.calls.append("remove_job")
        super().remove_job(job_id)

    def plan_round(self, *args):
        self.calls.append("plan")
        return super().plan_round(*args)

    def credit(self, *args):
        self.calls.append("credit")
        return super().credit(*args)


def test_the_scheduler_calls_the_round_rules_it_holds(gavel_table, monkeypatch):
    """(The compiled quiet rounds are TaskRounds' credit run in C, which bypasses the call: off here.)"""
    from hetsched.compiled import round_kernels

    monkeypatch.setattr(round_kernels, "ENABLED", False)
    jobs = GavelGenerator(seed=3, mean_interarrival_s=900, throughputs=gavel_table).jobs(20)
    plain = RoundSimulation(jobs, ClusterSpec.parse("2:2:2"), "max_min_fairness_perf", gavel_table,
                            record_timeline=False)
    swapped = RoundSimulation(jobs, ClusterSpec.parse("2:2:2"), "max_min_fairness_perf", gavel_table,
                              record_timeline=False)
    swapped.sched.rounds = recording = Recording(swapped.sched)
    while plain.step():
        pass
    while swapped.step():
        pass
    calls = recording.calls
    assert calls.count("add_job") == calls.count("remove_job") == len(jobs)
    assert calls.count("plan") >= calls.count("credit") > len(jobs)        # an empty plan credits nothing
    assert calls.index("add_job") < calls.index("plan") < calls.index("credit") < calls.index("remove_job")
    a, b = plain.result().jobs_frame(), swapped.result().jobs_frame()
    assert np.array_equal(a["jct_s"].to_numpy(), b["jct_s"].to_numpy())


class RecordingSelect(PrioritySelect):
    """Gavel's select stage, each round's walk counted."""

    walks = 0

    def select(self, order):
        self.walks += 1
        return super().select(order)


def test_the_round_rules_call_the_select_stage_the_scheduler_holds(gavel_table):
    """A swapped select stage is called every round, also where the compiled quiet rounds would run the walk
    themselves (they are off while a stage other than `PrioritySelect` selects): the same run, round by round."""
    jobs = GavelGenerator(seed=4, mean_interarrival_s=600, throughputs=gavel_table).jobs(20)
    runs = [RoundSimulation(jobs, ClusterSpec.parse("2:2:2"), "max_min_fairness_perf", gavel_table,
                            record_timeline=False) for _ in range(2)]
    runs[1].sched.selector = recording = RecordingSelect(runs[1].sched)
    for sim in runs:
        while sim.step():
            pass
    a, b = (sim.result() for sim in runs)
    assert recording.walks == b.num_rounds > len(jobs), (recording.walks, b.num_rounds)
    assert np.array_equal(a.jobs_frame()["jct_s"].to_numpy(), b.jobs_frame()["jct_s"].to_numpy())


def test_a_whole_round_stage_is_its_own_round_rules():
    """Synergy's server rounds: the stage the scheduler holds as its decide stage is the one it calls."""
    from hetsched.io.cluster_ini import synergy_cluster
    from hetsched.decide.synergy.server_rounds import ServerRounds
    from hetsched.traces import make_generator

    jobs = make_generator("synergy", jobs_per_hour=9.0).jobs(8)
    sim = RoundSimulation(jobs, synergy_cluster(servers=2), "FIFO+tune", None, record_timeline=False)
    assert isinstance(sim.sched.rounds, ServerRounds) and sim.sched.rounds is sim.sched.decide
    assert not sim.sched.rounds.reads_table
