import pandas as pd
import pytest

from hetsched import ClusterSpec, Server, SpecError


def test_parse_gavel_triplet_is_v100_p100_k80():
    spec = ClusterSpec.parse("36:24:12")
    assert spec.gpu_types == ("v100", "p100", "k80")
    assert spec.counts == (36, 24, 12)
    assert spec.num_gpus == 72
    assert spec.count("p100") == 24


def test_parse_drops_absent_types_and_named_form():
    assert ClusterSpec.parse("2:0:4").as_dict() == {"v100": 2, "k80": 4}
    assert ClusterSpec.parse("a100=8, t4=16").as_dict() == {"a100": 8, "t4": 16}


def test_servers_from_gpus_per_server():
    spec = ClusterSpec.parse("8:0:6", gpus_per_server="4:1:4")
    assert [s.num_gpus for s in spec.servers] == [4, 4, 4, 2]
    assert len(spec.server_shapes()) == 4
    assert len(ClusterSpec.parse("3:3:3").server_shapes()) == 9  # one GPU per server by default
    assert ClusterSpec.parse("8:0:0", gpus_per_server="4:0:0").num_gpus == 8    # 0 only for absent types
    with pytest.raises(SpecError, match="servers of 0 GPUs"):       # it was read as 1 GPU per server
        ClusterSpec.parse("8:0:6", gpus_per_server="4:1:0")


def test_prices_and_synergy_servers():
    spec = ClusterSpec.from_servers([Server("v100", 8, cpu_cores=24, dram_gb=500)] * 16, {"v100": 2.5})
    assert spec.num_gpus == 128 and spec.price("v100") == 2.5
    with pytest.raises(TypeError):
        spec.prices_per_hour["v100"] = 1.0  # immutable


@pytest.mark.parametrize("text, message", [
    ("36:36", "V100:P100:K80"),
    ("a:1:1", "not an integer"),
    ("-1:2:3", "negative"),
    ("0:0:0", "no GPUs"),
    (("0:0:0", "0:0:0"), "no GPUs"),
    ("v100=1,v100=2", "unique"),
])
def test_parse_errors(text, message):
    with pytest.raises(SpecError, match=message):
        ClusterSpec.parse(*((text,) if isinstance(text, str) else text))


@pytest.mark.parametrize("text", ["2x8/-24/500", "2x8/24/500@", "4:4"])
def test_a_malformed_cluster_names_every_form(text):
    """A server group with a typo was told only of the V100:P100:K80 form."""
    with pytest.raises(SpecError, match=r"SERVERSxGPUS/CPUS/GB.*TYPE=COUNT|TYPE=COUNT.*SERVERSxGPUS/CPUS/GB"):
        ClusterSpec.load(text)


def test_validation_errors():
    with pytest.raises(SpecError, match="servers hold"):
        ClusterSpec(("v100",), (4,), (Server("v100", 2),))
    with pytest.raises(SpecError, match="unknown GPU type"):
        ClusterSpec(("v100",), (4,), prices_per_hour={"k80": 1.0})
    with pytest.raises(SpecError, match="num_gpus"):
        Server("v100", 0)
    with pytest.raises(SpecError, match="invalid GPU type name"):
        ClusterSpec(("v 100",), (1,))
    with pytest.raises(Exception):
        ClusterSpec.parse("1:1:1").counts = (2, 2, 2)  # frozen


def test_the_own_cluster_comparison_takes_every_cluster_form():
    """`own_cluster.with_new_type` reads its clusters as `simulate` does: Gavel's forms and server groups."""
    from hetsched import load_throughputs
    from hetsched.experiments.own_cluster import with_new_type

    table = load_throughputs("gavel_simulation")
    frame = with_new_type(table, {"counts": "v100=4,k80=4", "servers": "1x4/24/500@v100+1x4/24/500@k80"},
                          ["max_min_fairness_perf"], num_jobs=6, jobs_per_hour=2.0)
    assert frame.set_index("cluster")["avg_jct_s"].to_dict() == pytest.approx(
        dict.fromkeys(["counts", "servers"], frame["avg_jct_s"].iloc[0]))     # the same GPUs, the same schedule


def test_parse_names_load_for_the_forms_only_load_reads():
    """`parse` reads GPU counts; handed a server group or a cluster file it says that `load` reads them, instead of
    listing those forms among the ones the string failed to match."""
    for text in ("1x4/24/500@v100", "cluster.ini", "nodes.csv"):
        with pytest.raises(SpecError, match=r"parse reads GPU counts only; ClusterSpec\.load reads"):
            ClusterSpec.parse(text)
    with pytest.raises(SpecError, match="none of the forms"):
        ClusterSpec.parse("16x8/24")


def test_the_fig11_timeline_takes_server_groups():
    """Fig. 11's timeline reads its cluster as `simulate` does: server groups give the same shares as the counts."""
    from hetsched import load_throughputs
    from hetsched.experiments.microbench import hierarchical_timeline

    table = load_throughputs("gavel_simulation")
    counts = hierarchical_timeline(table, cluster="3:3:3", timesteps=4)
    servers = hierarchical_timeline(table, cluster="3x1/8/64@v100+3x1/8/64@p100+3x1/8/64@k80", timesteps=4)
    pd.testing.assert_frame_equal(counts, servers)


def test_pod_requests_compare_each_pods_request_per_gpu_with_the_servers_share(tmp_path):
    """openb-style pods against servers of 16 cores and 64 GB per GPU: CPU-only pods are left out, a pod's request
    is per GPU, and a pod above the GPU-proportional share is counted."""
    from hetsched.experiments.own_cluster import pod_requests

    pods = tmp_path / "pods.csv"
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
                    "a,8000,16384,1,1000\n"          # 8 cores, 16 GB per GPU
                    "b,40000,65536,2,1000\n"         # 20 cores, 32 GB per GPU: above the CPU share
                    "c,4000,262144,1,500\n"          # 4 cores, 256 GB per GPU: above the memory share
                    "d,64000,65536,0,0\n")           # CPU only: not a GPU pod
    table = pod_requests(pods, ClusterSpec.load("2x4/64/256@v100")).set_index("resource")
    assert table["gpu_pods"].tolist() == [3, 3]
    assert table.loc["cpu_cores", "fair_share_per_gpu"] == 16 and table.loc["mem_gb", "fair_share_per_gpu"] == 64
    assert table.loc["cpu_cores", "request_per_gpu_median"] == 8 and table.loc["mem_gb", "request_per_gpu_median"] == 32
    assert table["pods_above_fair_pct"].tolist() == pytest.approx([100 / 3, 100 / 3])
    with pytest.raises(ValueError, match="need CPU cores and memory"):
        pod_requests(pods, ClusterSpec.parse("v100=8"))
