"""Synergy's cluster .ini files: the shipped ones, the defaults, and clear errors with file and line."""

import pytest

from hetsched import ClusterSpec, SpecError
from hetsched.io.cluster_ini import parse_cluster_ini, read_cluster_ini


def test_shipped_configs(shared_dir):
    folder = shared_dir / "data" / "synergy" / "configs"
    default = read_cluster_ini(folder / "default_cluster.ini")
    assert default.num_gpus == 128 and len(default.servers) == 16
    s = default.servers[0]
    assert (s.num_gpus, s.cpu_cores, s.dram_gb, s.storage_mbps) == (8, 24, 500, 500)
    assert read_cluster_ini(folder / "philly_cluster.ini").num_gpus == 512
    assert read_cluster_ini(folder / "cluster_6.ini").servers[0].cpu_cores == 48
    assert ClusterSpec.load(str(folder / "deployment.ini")).num_gpus == 32


def test_defaults_and_extensions():
    spec = parse_cluster_ini("[CLUSTER]\nservers_per_rack = 2\ngpu_type = a100\nprice_per_gpu_hour = 2.5\n")
    assert spec.gpu_types == ("a100",) and spec.num_gpus == 16 and spec.price("a100") == 2.5
    assert spec.servers[0].storage_mbps == 300            # the artifact's default when the key is missing


@pytest.mark.parametrize("text,match", [
    ("[CLUSTER]\nracks = 1\ncpus_per_server = lots\n", r"bad\.ini:3: cpus_per_server must be an integer"),
    ("[CLUSTER]\ngpus_per_server = 0\n", r"bad\.ini:2: gpus_per_server must be positive"),
    ("[CLUSTER]\nnum_gpus = 8\n", r"bad\.ini:2: unknown key 'num_gpus'"),
    ("racks = 1\n", r"bad\.ini:1: not a valid \.ini file"),
    ("[SCHEDULER]\npolicy = FIFO\n", r"bad\.ini: no \[CLUSTER\] section"),
])
def test_errors_name_file_and_line(text, match):
    with pytest.raises(SpecError, match=match):
        parse_cluster_ini(text, "bad.ini")


def test_missing_file(tmp_path):
    with pytest.raises(SpecError, match="cannot read"):
        read_cluster_ini(tmp_path / "nope.ini")
