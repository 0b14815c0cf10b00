"""The Philly `cluster_job_log` reader, on small files shaped like the public schema (spec/synergy.md s.3.3)."""

import json

import pytest

from hetsched import TraceError
from hetsched.traces import read_trace
from hetsched.traces.philly import parse_philly_records, read_philly_records


def attempt(start, end, *gpus_per_host):
    return {"start_time": start, "end_time": end,
            "detail": [{"ip": f"10.0.0.{i}", "gpus": [f"gpu{k}" for k in range(n)]} for i, n in enumerate(gpus_per_host)]}


LOG = [
    {"status": "Pass", "vc": "vc1", "jobid": "a", "user": "u1", "submitted_time": "2017-10-03 10:00:00",
     "attempts": [attempt("2017-10-03 10:05:00", "2017-10-03 12:05:00", 1)]},                  # 2 h, 1 GPU
    {"status": "Killed", "vc": "vc2", "jobid": "b", "user": "u2", "submitted_time": "2017-10-03 09:00:00",
     "attempts": [attempt("2017-10-03 09:10:00", "2017-10-03 09:40:00", 4, 4),                  # 30 min
                  attempt("None", "None"),
                  attempt("2017-10-03 10:00:00", "2017-10-03 11:00:00", 4, 4)]},               # + 60 min, 8 GPUs
    {"status": "Pass", "vc": "vc1", "jobid": "c", "user": "u1", "submitted_time": "2017-10-03 11:00:00",
     "attempts": [attempt("2017-10-03 11:00:00", "2017-10-03 11:10:00", 2)]},                  # 10 min: dropped
    {"status": "Pass", "vc": "vc1", "jobid": "d", "user": "u3", "submitted_time": "2017-10-03 12:00:00",
     "attempts": [attempt("2017-10-03 12:00:00", "2017-10-03 15:00:00", 3)]},                  # 3 GPUs
    {"status": "Failed", "vc": "vc3", "jobid": "e", "user": "u4", "submitted_time": "2017-10-03 08:30:00",
     "attempts": []},                                                                          # no attempt
]


def test_records(tmp_path):
    path = tmp_path / "cluster_job_log"
    path.write_text(json.dumps(LOG))
    single = read_philly_records(path)
    assert [r.jobid for r in single] == ["a", "b", "d"]
    assert [r.arrival_s for r in single] == [3600.0, 0.0, 3 * 3600.0]     # t = 0 is b's submission
    assert [r.duration_s for r in single] == [7200.0, 5400.0, 10800.0]
    assert {r.gpus for r in single} == {1}
    multi = read_philly_records(path, multi_gpu=True)
    assert [r.gpus for r in multi] == [1, 8, 1]              # 3 GPUs is not a power of two: 1 (exp mode)
    strict = read_philly_records(path, multi_gpu=True, exponential=False)
    assert [r.jobid for r in strict] == ["a", "b"]


def test_as_jobs(tmp_path):
    path = tmp_path / "cluster_job_log"
    path.write_text(json.dumps(LOG))
    jobs = read_trace(path, "philly")
    assert [j.arrival_time_s for j in jobs] == [0.0, 3600.0]
    assert [j.scale_factor for j in jobs] == [8, 1]
    assert jobs[0].job_type == "alexnet" and jobs[0].total_steps == int(5400 / 0.6)


@pytest.mark.parametrize("text,match", [
    ("[{", r"log:1: not valid JSON"),
    ('{"a": 1}', r"expected a JSON array"),
    ('[{"jobid": "x", "attempts": []}]', r"job #0: field 'submitted_time': missing"),
    ('[{"jobid": "x", "submitted_time": "yesterday", "attempts": [{}]}]', r"field 'submitted_time': expected"),
])
def test_errors(text, match):
    with pytest.raises(TraceError, match=match):
        parse_philly_records(text, "log")


def test_as_production_trace_with_table_job_types_and_filters(tmp_path, capsys):
    """`--job-types table`: job types drawn from a throughput table, users/vcs kept, filters applied."""
    from hetsched.cli.main import main
    from hetsched.traces.production import Filters, JobMapping

    path = tmp_path / "cluster_job_log"
    path.write_text(json.dumps(LOG))
    jobs = read_trace(path, "philly", mapping=JobMapping(), filters=Filters(vcs=frozenset({"vc1"})))
    assert [(j.user, j.vc, j.entity, j.scale_factor, j.duration_s) for j in jobs] == [("u1", "vc1", "vc1", 1, 7200.0)]
    assert "batch size" in jobs[0].job_type or jobs[0].job_type in ("A3C", "CycleGAN")   # a Gavel job type
    out = tmp_path / "jobs.csv"
    assert main(["convert", "trace", str(path), str(out), "--from", "philly", "--job-types", "table",
                 "--status", "Killed"]) == 0
    assert "2 rows: 1 jobs kept" in capsys.readouterr().err
    assert [j.scale_factor for j in read_trace(out)] == [8]


@pytest.mark.parametrize("extra, message", [
    (["--status", "Killed"], "--status applies to a Philly log read as the other production traces are: add "
                             "--job-types table"),
    (["--job-types", "synergy", "--vc", "vc1"], "--vc applies to a Philly log read as"),
    (["--entity", "user"], "--entity applies to a Philly log read as"),
    (["--seed", "4"], "--seed acts only when job types are drawn from a throughput table"),
])
def test_options_of_the_table_draw_need_job_types_table(extra, message, tmp_path, capsys):
    """With Synergy's class split (philly's default) a filter switched job types to the table's draw without a
    word; --entity, --seed and --throughputs did nothing."""
    from hetsched.cli.main import main

    path = tmp_path / "cluster_job_log"
    path.write_text(json.dumps(LOG))
    out = tmp_path / "jobs.csv"
    assert main(["convert", "trace", str(path), str(out), "--from", "philly", *extra]) == 2
    assert message in capsys.readouterr().err and not out.exists()
