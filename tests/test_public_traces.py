"""Production-trace importers: schema-shaped samples of every format, the real Alibaba files, bad input, mapping."""

import json

import numpy as np
import pytest

from hetsched import TraceError
from hetsched.cli.main import main
from hetsched.model.jobs import Job
from hetsched.model.throughputs import load_throughputs
from hetsched.traces import read_trace
from hetsched.traces.formats import FORMATS
from hetsched.traces.production import Filters, JobMapping

HELIOS = """job_id,user,vc,jobname,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue
1,u1,vcA,train,1,6,1,COMPLETED,2020-04-01 00:00:00,2020-04-01 00:00:05,2020-04-01 01:00:05,3600,5
2,u2,vcB,train,8,48,1,FAILED,2020-04-01 00:10:00,2020-04-01 00:11:00,2020-04-01 00:41:00,1800,60
3,u1,vcA,cpu,0,4,1,COMPLETED,2020-04-01 00:20:00,2020-04-01 00:20:00,2020-04-01 00:30:00,600,0
4,u3,vcB,train,3,18,1,COMPLETED,2020-04-01 01:00:00,2020-04-01 01:00:00,2020-04-01 03:00:00,7200,0
5,u3,vcA,big,64,400,8,COMPLETED,2020-04-01 02:00:00,2020-04-01 02:00:00,2020-04-01 03:00:00,3600,0
"""
ACME = """job_id,user,node_num,gpu_num,cpu_num,mem_per_pod_GB,shared_mem_per_pod,type,state,submit_time,start_time,end_time,fail_time,stop_time,duration,queue,gpu_time
a,u1,1,2,16,64,8,SFT,COMPLETED,2023-03-01 08:00:00,2023-03-01 08:00:10,2023-03-01 09:00:10,,,3600,10,7200
b,u2,1,1,8,32,8,Evaluation,CANCELLED,2023-03-01 08:30:00,,,,,,0,0
c,u2,2,16,128,512,8,Pretrain,FAILED,2023-03-01 09:00:00,2023-03-01 09:00:00,2023-03-01 10:00:00,,,3600,0,57600
"""
OPENB = """name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
p0,12000,16384,1,1000,,LS,Running,100,5100,100
p1,6000,12288,1,460,T4,LS,Succeeded,200,2200,300
p2,8000,8192,0,0,,BE,Succeeded,250,900,250
p3,88000,327680,8,1000,V100M16|V100M32,LS,Failed,400,9400,1400
p4,4000,4096,2,1000,,BE,Pending,500,600,
"""
A2026 = """job_name,organization,gpu_model,cpu_request,gpu_request,worker_num,submit_time,duration,job_type
239255,13,A10,20,1,1,0,2764799,HP
437260,57,A100-SXM4-80GB,15,1,4,9589663,41060,Spot
437261,57,A100-SXM4-80GB,15,2,1,9589700,71718,Spot
"""
PAI_TASKS = """j1,worker,2,Terminated,1000,4600,600,29.3,50,V100
j1,ps,1,Terminated,1000,4700,600,29.3,,MISC
j2,tensorflow,1,Terminated,2000,2600,800,30,100,MISC
j3,worker,1,Running,3000,,800,30,100,T4
"""
PAI_JOBS = """j1,i1,alice,Terminated,1000,4700
j2,i2,bob,Terminated,2000,2600
"""
GPU_MAP = "T4=p100x0.8,V100M16=v100,V100M32=v100,A10=v100x1.1,A100-SXM4-80GB=v100x2.5"
SAMPLES = {"helios": HELIOS, "acme": ACME, "openb": OPENB, "alibaba2026": A2026, "pai2020": PAI_TASKS}


def parse(fmt, text, **kw):
    reports = []
    jobs = FORMATS[fmt].parse(text.encode(), source=f"{fmt}.csv", report=reports.append,
                              mapping=kw.pop("mapping", JobMapping(gpu_map=GPU_MAP)), **kw)
    return jobs, reports[0]


def test_helios_keeps_arrivals_durations_users_vcs_and_rounds_gpu_counts_up():
    jobs, rep = parse("helios", HELIOS)
    assert [j.arrival_time_s for j in jobs] == [0.0, 600.0, 3600.0]
    assert [j.duration_s for j in jobs] == [3600.0, 1800.0, 7200.0]
    assert [j.scale_factor for j in jobs] == [1, 8, 4]          # 3 GPUs -> the table's next scale factor, 4
    assert [(j.user, j.vc, j.entity) for j in jobs] == [("u1", "vcA", "vcA"), ("u2", "vcB", "vcB"),
                                                         ("u3", "vcB", "vcB")]
    assert (rep.no_gpus, rep.too_large, rep.rounded_up) == (1, 1, 1)
    table = load_throughputs("gavel_simulation")
    for j in jobs:   # steps = duration x the drawn type's throughput on v100 (no pin)
        assert j.total_steps == pytest.approx(j.duration_s * table.get(j.job_type, j.scale_factor, "v100"))


def test_acme_drops_jobs_that_never_ran():
    jobs, rep = parse("acme", ACME)
    assert [(j.user, j.scale_factor, j.duration_s) for j in jobs] == [("u1", 2, 3600.0), ("u2", 16, 3600.0)] \
        or [(j.user, j.scale_factor) for j in jobs] == [("u1", 2)]
    assert rep.no_duration == 1
    assert all(j.entity == j.user for j in jobs)                 # no vcs: entities are users


def test_openb_pins_gpu_models_and_counts_fractional_gpus_as_one():
    jobs, rep = parse("openb", OPENB)
    assert [j.pinned_gpu_types for j in jobs] == ["", "t4", "v100m16|v100m32"]
    assert [j.duration_s for j in jobs] == [5000.0, 1900.0, 8000.0]
    assert [j.scale_factor for j in jobs] == [1, 1, 8]
    assert (rep.no_gpus, rep.no_duration) == (1, 1)               # the CPU pod; the pending pod
    assert rep.part_gpus == 1 and "1 asked for part of a GPU" in rep.summary()   # p1: 460 milli-GPUs
    with pytest.raises(TraceError, match=r"openb.csv:3: field 'gpu_milli': expected a number >= 0, got 'x'"):
        parse("openb", OPENB.replace(",1,460,", ",1,x,"))
    table = load_throughputs("gavel_simulation")
    t4 = jobs[1]
    assert t4.total_steps == pytest.approx(1900 * 0.8 * table.get(t4.job_type, 1, "p100"))


def test_a_duration_replays_as_recorded_on_the_first_pinned_type_else_on_the_reference_gpu():
    """docs/rules.md#production-traces: `--reference-gpu` names the type unpinned jobs' durations were run on."""
    table = load_throughputs("gavel_simulation")
    for reference, factor in ((None, ("v100", 1.0)), ("G2", ("p100", 1.0)), ("T4", ("p100", 0.8))):
        jobs, _ = parse("openb", OPENB, mapping=JobMapping(gpu_map=GPU_MAP + ",G2=p100", reference_gpu=reference))
        free, t4, v100 = jobs
        assert free.total_steps == pytest.approx(5000 * factor[1] * table.get(free.job_type, 1, factor[0]))
        assert t4.total_steps == pytest.approx(1900 * 0.8 * table.get(t4.job_type, 1, "p100"))   # its pin rules
        assert v100.total_steps == pytest.approx(8000 * table.get(v100.job_type, 8, "v100"))


def test_openb_pods_still_running_at_the_lists_end_are_counted_as_censored():
    text = OPENB.replace("LS,Running,100,5100,100", "LS,Running,100,9400,100")        # p0 now ends with the list
    _, rep = parse("openb", text)
    assert rep.censored == 1 and "1 still running when the trace ends" in rep.summary()   # p0; not p3 (Failed)
    _, rep = parse("openb", OPENB)
    assert rep.censored == 0 and "still running" not in rep.summary()       # p0 ended before the list did


def test_alibaba2026_gpus_are_request_times_workers_and_vc_is_the_organization():
    jobs, _ = parse("alibaba2026", A2026)
    assert [(j.scale_factor, j.vc, j.pinned_gpu_types) for j in jobs] == [
        (1, "13", "a10"), (4, "57", "a100-sxm4-80gb"), (2, "57", "a100-sxm4-80gb")]
    spot, _ = parse("alibaba2026", A2026, filters=Filters(statuses=frozenset({"spot"})))
    assert len(spot) == 2


def test_pai2020_groups_tasks_into_jobs_and_reads_users_beside_it(tmp_path):
    jobs, rep = parse("pai2020", PAI_TASKS)
    assert [(j.scale_factor, j.pinned_gpu_types, j.duration_s) for j in jobs] == [(1, "v100", 3700.0),
                                                                                 (1, "", 600.0)]
    assert rep.no_duration == 1                                   # j3 is still running
    assert rep.part_gpus == 0                                     # j1: two workers at 50 % make one GPU
    (tmp_path / "pai_task_table.csv").write_text(PAI_TASKS)
    (tmp_path / "pai_job_table.csv").write_text(PAI_JOBS)
    jobs = read_trace(tmp_path / "pai_task_table.csv", "pai2020")
    assert [j.user for j in jobs] == ["alice", "bob"]


def test_mapping_is_seeded_and_filters_apply():
    a, _ = parse("helios", HELIOS, mapping=JobMapping(seed=1))
    b, _ = parse("helios", HELIOS, mapping=JobMapping(seed=1))
    c, _ = parse("helios", HELIOS * 1 + "", mapping=JobMapping(seed=2))
    assert a == b
    many = "\n".join(HELIOS.splitlines()[:1] + [f"{i},u,v,x,1,1,1,COMPLETED,2020-04-01 00:00:{i % 60:02d},,,60,0"
                                               for i in range(200)]) + "\n"
    x, _ = parse("helios", many, mapping=JobMapping(seed=1))
    y, _ = parse("helios", many, mapping=JobMapping(seed=2))
    assert [j.job_type for j in x] != [j.job_type for j in y]
    assert len({j.job_type for j in x}) > 5                       # drawn from the whole table
    assert c[0].arrival_time_s == 0.0
    only, rep = parse("helios", HELIOS, filters=Filters(vcs=frozenset({"vcB"}), since_s=1000.0))
    assert [j.vc for j in only] == ["vcB"] and rep.filtered == 2


@pytest.mark.parametrize("fmt,text,match", [
    ("helios", HELIOS.replace("3600,5", "an hour,5"), r"helios.csv:2: field 'duration': expected a number"),
    ("helios", HELIOS.replace("2020-04-01 01:00:00,2020", "April,2020"),
     r"helios.csv:5: field 'submit_time': expected seconds or 'YYYY-mm-dd HH:MM:SS'"),
    ("helios", "job_id,user\n1,u\n", r"helios.csv:1: not a Helios cluster_log.csv file: it lacks the columns"),
    ("openb", OPENB.replace("p3,88000,327680,8", "p3,88000,327680,2.5"), r"openb.csv:5: field 'num_gpu': expected a "
                                                                          r"whole number"),
    ("openb", OPENB.replace("p3,88000,327680,8", "p3,88000,327680,1e300"), r"openb.csv:5: field 'num_gpu': expected "
                                                                            r"a whole number of GPUs up to 2147483647"),
    ("openb", OPENB.replace(",100,5100,100", ",soon,5100,100"), r"openb.csv:2: field 'creation_time'"),
    ("alibaba2026", A2026.replace("41060", "long"), r"alibaba2026.csv:3: field 'duration'"),
    ("pai2020", PAI_TASKS.replace("j2,tensorflow,1", "j2,tensorflow,x"), r"pai2020.csv:3: field 'inst_num'"),
    ("acme", 'job_id,gpu_num,submit_time,duration\n"a,1\n', r"acme.csv.*malformed CSV"),
])
def test_bad_input_names_file_line_and_field(fmt, text, match):
    with pytest.raises(TraceError, match=match):
        parse(fmt, text)


def test_unmapped_pinned_model_is_an_error_in_simulate_not_a_silent_default(tmp_path, capsys):
    trace = tmp_path / "openb.csv"
    trace.write_text(OPENB)
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,8,T4\nn1,96000,393216,8,V100M16\n"
                     "n2,32000,131072,0,\n")
    args = ["simulate", "--policy", "max_min_fairness_perf", "--cluster", str(nodes), "--trace", str(trace),
            "--from", "openb", "--json"]
    assert main(args) == 2
    assert "['t4', 'v100m16'] that the throughput table 'gavel_simulation' does not measure" in \
        capsys.readouterr().err
    assert main(args + ["--gpu-map", GPU_MAP]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["num_jobs"] == 3 and row["config"]["cluster"] == "t4=8,v100m16=8"


def test_pinned_jobs_run_only_on_their_types():
    from hetsched.model.cluster import ClusterSpec
    from hetsched.sim.simulator import simulate

    jobs = [Job(job_id=i, arrival_time_s=0, job_type="ResNet-18 (batch size 64)", scale_factor=1,
                total_steps=20000, pinned_gpu_types="k80" if i % 2 else "") for i in range(6)]
    frame = simulate(jobs, ClusterSpec.parse("4:0:4"), "max_min_fairness_perf").jobs_frame()
    pinned = frame[frame.job_id % 2 == 1]
    assert (pinned.seconds_on_v100 == 0).all() and (pinned.seconds_on_k80 > 0).all()
    assert (frame[frame.job_id % 2 == 0].seconds_on_v100 > 0).any()
    with pytest.raises(Exception, match="pinned to GPU types \\['a100'\\]"):
        simulate([jobs[0].with_(pinned_gpu_types="a100")], ClusterSpec.parse("4:0:4"), "max_min_fairness_perf")


# ---- the real Alibaba files in ../shared (skipped where they are absent) ----------------------------------
def test_real_openb_tasks_on_the_real_openb_cluster(shared_dir):
    folder = shared_dir / "data" / "alibaba_openb"
    if not folder.exists():
        pytest.skip("no ../shared/data/alibaba_openb")
    from hetsched.model.cluster import ClusterSpec

    cluster = ClusterSpec.load(str(folder / "openb_node_list_gpu_node.csv"))
    assert cluster.num_gpus == 6212 and len(cluster.servers) == 1213 and cluster.has_resources
    assert set(cluster.gpu_types) == {"p100", "t4", "v100m16", "v100m32", "a10", "g2", "g3"}
    assert ClusterSpec.load(str(folder / "openb_node_list_all_node.csv")).num_gpus == 6212   # CPU nodes left out
    reports = []
    jobs = read_trace(folder / "openb_pod_list_gpuspec33.csv", "openb", mapping=JobMapping(
        gpu_map=GPU_MAP + ",G1=k80,G2=p100,G3=v100"), report=reports.append)
    rep = reports[0]
    assert rep.rows == 8152 and rep.no_gpus == 1088 and len(jobs) == 8152 - 1088 - rep.no_duration
    pinned = [j for j in jobs if j.pinned_gpu_types]
    assert 0.3 < len(pinned) / len(jobs) < 0.6 and all(set(j.allowed_gpu_types) <= set(cluster.gpu_types)
                                                      for j in pinned)
    with pytest.raises(TraceError, match="lists resources only"):
        read_trace(folder / "openb_pod_list_multigpu50.csv", "openb")


def test_real_2026_node_list(shared_dir):
    path = shared_dir / "data" / "alibaba_2026_node_info_df.csv"
    if not path.exists():
        pytest.skip("no 2026 node list")
    from hetsched.model.cluster import ClusterSpec

    cluster = ClusterSpec.load(str(path))
    assert len(cluster.servers) == 4278 and len(cluster.gpu_types) == 6
    assert cluster.count("a100-sxm4-80gb") == 3456


def test_convert_cli_prints_what_it_dropped(tmp_path, capsys):
    src = tmp_path / "cluster_log.csv"
    src.write_text(HELIOS)
    out = tmp_path / "jobs.csv"
    assert main(["convert", "trace", str(src), str(out), "--from", "helios", "--status", "completed",
                 "--seed", "3"]) == 0
    err = capsys.readouterr().err
    assert "5 rows: 2 jobs kept; dropped 1 without GPUs" in err and "1 by the filters" in err
    jobs = read_trace(out)
    assert [j.vc for j in jobs] == ["vcA", "vcB"] and jobs[1].scale_factor == 4
    assert main(["convert", "trace", str(src), str(out), "--vc", "x"]) == 2     # a canonical CSV has no filters
    assert "applies to the production traces" in capsys.readouterr().err


def test_a_million_row_trace_streams(tmp_path):
    """Not a timing test: the chunked path (more rows than one chunk) gives the same jobs as one read."""
    from hetsched.traces import production

    rows = [f"{i},u{i % 7},vc{i % 3},x,{1 + i % 2},1,1,COMPLETED,{i},,,{60 + i},0" for i in range(2500)]
    text = HELIOS.splitlines()[0] + "\n" + "\n".join(rows) + "\n"
    whole = FORMATS["helios"].parse(text.encode(), source="h")
    old = production.CHUNK_ROWS
    production.CHUNK_ROWS = 1000
    try:
        path = tmp_path / "h.csv"
        path.write_text(text)
        chunked = read_trace(path, "helios")
    finally:
        production.CHUNK_ROWS = old
    assert whole == chunked and len(whole) == 2500
    assert np.all(np.diff([j.arrival_time_s for j in whole]) >= 0)


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_cli_writes_columns_that_read_back_as_the_same_jobs(tmp_path, suffix, capsys):
    """`convert trace` writes production traces from columns (no Job objects); reading the file back gives
    exactly the jobs the Job path gives."""
    src = tmp_path / "pods.csv"
    src.write_text(OPENB)
    out = tmp_path / f"jobs{suffix}"
    assert main(["convert", "trace", str(src), str(out), "--from", "openb", "--gpu-map", GPU_MAP, "--seed", "4"]) == 0
    assert "converted 3 jobs" in capsys.readouterr().err
    direct = FORMATS["openb"].parse(OPENB.encode(), source="x", mapping=JobMapping(seed=4, gpu_map=GPU_MAP))
    assert read_trace(out) == direct
