import dataclasses

import pytest

from hetsched import AdaptationMode, Job, SpecError


def make(**kw):
    base = dict(job_id=0, arrival_time_s=0.0, job_type="ResNet-50 (batch size 64)", scale_factor=2,
                total_steps=100.0)
    base.update(kw)
    return Job(**base)


def test_job_fields_and_derived_values():
    job = make(slo_factor=2.0, duration_s=100.0, arrival_time_s=50.0, mode="gns")
    assert job.model == "ResNet-50" and job.batch_size == 64
    assert job.key == ("ResNet-50 (batch size 64)", 2)
    assert job.deadline_s == 250.0
    assert job.mode is AdaptationMode.GNS
    assert make(job_type="A3C").batch_size is None


def test_job_is_immutable():
    job = make()
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.total_steps = 3
    assert job.with_(total_steps=5.0).total_steps == 5.0


@pytest.mark.parametrize("changes, message", [
    (dict(job_id=-1), "job_id"),
    (dict(scale_factor=0), "scale_factor"),
    (dict(scale_factor=1.5), "scale_factor"),
    (dict(total_steps=-1.0), "total_steps"),
    (dict(total_steps=float("nan")), "total_steps"),
    (dict(arrival_time_s=-5.0), "arrival_time_s"),
    (dict(priority_weight=0.0), "priority_weight"),
    (dict(job_type=" "), "job_type"),
    (dict(mode="elastic"), "mode"),
    (dict(cpu_demand=-3.0), "cpu_demand"),
])
def test_invalid_jobs_are_rejected(changes, message):
    with pytest.raises(SpecError, match=message):
        make(**changes)
