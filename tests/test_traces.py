"""Trace readers and writers: round trips, the artifacts' own files, and bad input."""

from collections import Counter

import pytest

from hetsched import AdaptationMode, TraceError
from hetsched.traces import GavelGenerator, read_trace, write_trace
from hetsched.traces.canonical import parse_canonical_csv
from hetsched.traces.gavel_tsv import format_gavel_trace, parse_gavel_trace
from hetsched.traces.shockwave_tsv import parse_shockwave_trace
from hetsched.traces.synergy_csv import parse_synergy_csv


@pytest.fixture(scope="module")
def jobs(gavel_table):
    return GavelGenerator(seed=2, mean_interarrival_s=700, multi_gpu=True, multi_priority=True, slos=True,
                          throughputs=gavel_table).jobs(300)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_canonical_round_trip_is_exact(tmp_path, jobs, suffix):
    path = tmp_path / f"jobs{suffix}"
    write_trace(jobs, path)
    assert read_trace(path) == jobs


def test_gavel_trace_round_trip(tmp_path, jobs):
    path = tmp_path / "jobs.trace"
    kept = write_trace(jobs, path, lossy=True)        # Gavel's format has SLOs but no durations for their deadlines
    assert all(j.slo_factor is not None for j in jobs)
    assert kept.lost == {"duration_s": len(jobs)} and not kept.unread
    assert kept.rounded["total_steps"] == sum(not float(j.total_steps).is_integer() for j in jobs)
    again = read_trace(path)
    assert [(j.job_type, j.scale_factor, int(j.total_steps), j.priority_weight, j.slo_factor, j.command)
            for j in jobs] == [(j.job_type, j.scale_factor, j.total_steps, j.priority_weight, j.slo_factor,
                                j.command) for j in again]
    assert all(abs(a.arrival_time_s - b.arrival_time_s) <= 5e-7 for a, b in zip(jobs, again))
    # A second round trip through the text format is the identity.
    assert format_gavel_trace(again) == path.read_text()


def test_artifact_trace_equals_generated_stream(shared_dir, gavel_table):
    """The artifact's .trace (integral steps, 6-decimal arrivals) is our stream written in Gavel's format."""
    theirs = read_trace(shared_dir / "fidelity/gavel/continuous_seed0_lam1500.trace")
    ours = GavelGenerator(seed=0, mean_interarrival_s=1500, throughputs=gavel_table).jobs(len(theirs))
    assert [(j.job_type, j.scale_factor, int(j.total_steps)) for j in ours] == \
        [(j.job_type, j.scale_factor, j.total_steps) for j in theirs]
    assert all(abs(a.arrival_time_s - b.arrival_time_s) <= 5e-7 for a, b in zip(ours, theirs))


def test_convert_gavel_trace_to_canonical_and_back(tmp_path, shared_dir):
    src = shared_dir / "data/gavel/traces/artifact_evaluation.trace"
    jobs = read_trace(src)
    assert len(jobs) == 15 and Counter(j.scale_factor for j in jobs) == {1: 12, 2: 3}
    write_trace(jobs, tmp_path / "a.parquet")
    write_trace(read_trace(tmp_path / "a.parquet"), tmp_path / "b.trace")
    assert read_trace(tmp_path / "b.trace") == jobs


def test_shockwave_trace(shared_dir):
    path = next((shared_dir / "data/shockwave/traces").glob("120_*.trace"))
    jobs = read_trace(path, "shockwave")
    assert len(jobs) == 120
    # spec/shockwave.md s.2.5: accordion 59, gns 57, static 4; 92/20/8 jobs on 1/2/4 GPUs.
    assert Counter(j.mode for j in jobs) == {AdaptationMode.ACCORDION: 59, AdaptationMode.GNS: 57,
                                             AdaptationMode.STATIC: 4}
    assert Counter(j.scale_factor for j in jobs) == {1: 92, 2: 20, 4: 8}
    assert jobs[0].job_type == "LM (batch size 10)" and jobs[0].duration_s == 1418
    assert read_trace(path) == jobs                                  # a 12-field .trace is sniffed


@pytest.mark.parametrize("name", ["120_0.2_5_100_40_25", "220_0.2_5_100_25_4", "460_0.2_5_100_10_1",
                                  "900_0.2_5_1000_5_15", "900_0.2_5_100_5_15"])
def test_shockwave_traces_convert_both_ways_byte_for_byte(shared_dir, tmp_path, name):
    src = next((shared_dir / "data/shockwave/traces").glob(f"{name}_*.trace"))
    short = "_".join(name.split("_")[i] for i in (0, 4, 5)) + ("_grid100" if name.startswith("900_0.2_5_100_") else "")
    committed = read_trace(f"data/traces/shockwave_{short}.csv")
    assert committed == read_trace(src)
    write_trace(committed, tmp_path / "back.trace", "shockwave")
    assert (tmp_path / "back.trace").read_bytes() == src.read_bytes()


def test_synergy_csv(shared_dir):
    jobs = read_trace(shared_dir / "fidelity/synergy/philly_derived_single_9.0jph_seed42.csv", "synergy")
    assert len(jobs) == 7023 and {j.scale_factor for j in jobs} == {1}
    arrivals = [j.arrival_time_s for j in jobs]
    assert arrivals == sorted(arrivals) and len(set(arrivals)) == len(arrivals)


GOOD = ("ResNet-18 (batch size 64)\tpython3 x.py\tcifar\t--steps\t1\t1000\t1\t1\t-1.000000\t0.000000\n")


@pytest.mark.parametrize("line, field, message", [
    ("ResNet-18 (batch size 64)\tpython3 x.py\tcifar\t--steps\t1\t1000\t1\t1\t-1\n", None, "10 tab-separated"),
    ("ResNet-18 (batch size 64)\tpython3 x.py\tcifar\t--steps\t1\tmany\t1\t1\t-1\t0\n", "total_steps", "number"),
    ("ResNet-18 (batch size 64)\tpython3 x.py\tcifar\t--steps\t1\t1000\t-2\t1\t-1\t0\n", "scale_factor", ">= 1"),
    ("BERT (batch size 8)\tpython3 x.py\tcifar\t--steps\t1\t1000\t1\t1\t-1\t0\n", "job_type", "unknown job type"),
    ("ResNet-18 (batch size 64)\tpython3 x.py\tcifar\t--steps\t2\t1000\t1\t1\t-1\t0\n", "needs_data_dir", "0 or 1"),
    ("ResNet-18 (batch size 64)\tpython3 x.py\tcifar\t--steps\t1\t1000\t1\t1\t-1\tnan\n", "arrival_time", "finite"),
    ("ResNet-18 (batch size 64)\tpython3 x.py\tcifar\t--steps\t1\t1000\t1\t0\t-1\t0\n", None, "priority_weight"),
])
def test_malformed_gavel_line_names_file_line_and_field(tmp_path, line, field, message):
    path = tmp_path / "bad.trace"
    path.write_text(GOOD + "\n" + line)
    with pytest.raises(TraceError, match=message) as info:
        read_trace(path)
    err = info.value
    assert err.source == str(path) and err.line == 3 and err.field == field
    assert str(err).startswith(f"{path}:3: ")


def test_other_readers_report_positions():
    with pytest.raises(TraceError, match=r"s\.csv:2: field 'gpu_demand'"):
        parse_synergy_csv("0,alexnet,0.0,10,1\n1,alexnet,1.0,10,-1\n", source="s.csv")
    with pytest.raises(TraceError, match=r"field 'job_id': duplicate"):
        parse_synergy_csv("0,alexnet,0.0,10,1\n0,res18,1.0,10,1\n")
    with pytest.raises(TraceError, match=r"field 'mode'"):
        parse_shockwave_trace("LM (batch size 10)\tc\tw\t--s\t1\t5\t1\televated\t1\t-1\t10\t0\n")
    with pytest.raises(TraceError, match=r"header lacks required columns"):
        parse_canonical_csv("job_id,job_type\n0,A3C\n")
    with pytest.raises(TraceError, match=r"<trace>:3: field 'scale_factor'"):
        parse_canonical_csv("job_id,arrival_time_s,job_type,scale_factor,total_steps\n0,0,A3C,1,5\n1,0,A3C,x,5\n")
    with pytest.raises(TraceError, match=r":2: not UTF-8"):
        parse_gavel_trace(b"\n\xff\xfe")


def test_columns_that_are_not_job_fields_are_named_with_the_field_they_resemble(caplog, tmp_path):
    text = "job_id,arrival_time_s,job_type,scale_factor,total_steps,slo,priority,notes\n0,0,A3C,1,5,2,3,x\n"
    with caplog.at_level("WARNING", logger="hetsched.traces.canonical"):
        jobs = parse_canonical_csv(text, source="t.csv")
    assert jobs[0].slo_factor is None and jobs[0].priority_weight == 1.0          # ignored, as the warning says
    assert ("t.csv: ignoring columns that are not job fields: 'slo' (did you mean 'slo_factor'?), 'priority' "
            "(did you mean 'priority_weight'?), 'notes'") in caplog.text
    caplog.clear()
    write_trace(jobs, tmp_path / "t.parquet")
    read_trace(tmp_path / "t.parquet")
    assert "ignoring" not in caplog.text                                           # a trace's own columns: no word


def test_unknown_extension_and_read_only_format(tmp_path):
    with pytest.raises(TraceError, match="extension"):
        read_trace(tmp_path / "x.txt")
    with pytest.raises(TraceError, match="read-only"):
        write_trace([], tmp_path / "x.trace", "philly")
    with pytest.raises(TraceError, match="cannot read"):
        read_trace(tmp_path / "missing.trace")


@pytest.mark.parametrize("fmt, change, field", [
    ("gavel", dict(pinned_gpu_types="v100"), "pinned_gpu_types"),
    ("shockwave", dict(pinned_gpu_types="v100"), "pinned_gpu_types"),
    ("gavel", dict(mode=AdaptationMode.GNS), "mode"),
    ("gavel", dict(entity="teamA"), "entity"),
    ("synergy", dict(priority_weight=2.0), "priority_weight"),
    ("synergy", dict(slo_factor=2.0), "slo_factor"),
    ("gavel", dict(job_id=7), "job_id"),                    # ids are line numbers there
])
def test_artifact_formats_refuse_fields_they_cannot_carry(tmp_path, gavel_table, fmt, change, field):
    """The artifacts' formats dropped these without a word (a pinned job ran anywhere, a GNS job as static)."""
    jobs = GavelGenerator(seed=1, mean_interarrival_s=700, throughputs=gavel_table).jobs(4)
    jobs = [jobs[0], jobs[1].with_(**change), *jobs[2:]]
    path = tmp_path / "out"
    with pytest.raises(TraceError, match=rf"{fmt}'s format cannot carry .*{field} \("):
        write_trace(jobs, path, fmt)
    assert not path.exists()
    kept = write_trace(jobs, path, fmt, lossy=True)
    assert field in kept.lost and f"dropped {field}" in kept.summary()


def test_a_gavel_trace_with_an_slo_but_no_duration_is_refused_by_the_core(tmp_path, gavel_table):
    """Gavel's .trace has an SLO column but no duration: the SLO policy ran as if there were no SLOs (0 violations
    instead of 5 on a 30-job stream)."""
    from hetsched import ClusterSpec
    from hetsched.errors import HetschedError
    from hetsched.sim.simulator import simulate

    jobs = GavelGenerator(seed=0, mean_interarrival_s=900, slos=True, throughputs=gavel_table).jobs(5)
    write_trace(jobs, tmp_path / "s.trace", lossy=True)
    with pytest.raises(HetschedError, match=r"job 0: an SLO \(10 x its duration\) but no duration_s"):
        simulate(read_trace(tmp_path / "s.trace"), ClusterSpec.parse("2:2:2"), "gavel", gavel_table)
    simulate(jobs, ClusterSpec.parse("2:2:2"), "gavel", gavel_table)          # the jobs themselves run


def test_only_a_formats_own_precision_counts_as_rounding():
    """Steps within one step and times within a microsecond are rounding; a larger difference is a loss (the
    tolerance was relative: a million steps read back as half a million counted as rounded)."""
    from hetsched.model.jobs import Job
    from hetsched.traces.keeps import compare

    job = Job(0, 1000.0, "A3C", 1, 1e6)
    kept = compare([job, job], [job.with_(total_steps=999999.0, arrival_time_s=1000.0000004),
                                job.with_(total_steps=5e5)], "gavel")
    assert kept.rounded == {"total_steps": 1, "arrival_time_s": 1} and kept.lost == {"total_steps": 1}
