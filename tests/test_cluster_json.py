"""JSON cluster files: counts or server shapes with $/h per type; --prices overrides; clear errors."""

import json

import pytest

from hetsched.cli.main import main
from hetsched.model.cluster import ClusterSpec
from hetsched.errors import SpecError


def _write(tmp_path, data, name="c.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return str(path)


def test_counts_shapes_and_prices(tmp_path):
    spec = ClusterSpec.load(_write(tmp_path, {"gpus": {"v100": 8, "k80": 6}, "gpus_per_server": {"v100": 4},
                                              "prices_per_hour": {"v100": 2.48, "k80": 0.45}}))
    assert spec.gpu_types == ("v100", "k80") and spec.counts == (8, 6)
    assert [s.num_gpus for s in spec.servers if s.gpu_type == "v100"] == [4, 4]
    assert dict(spec.prices_per_hour) == {"v100": 2.48, "k80": 0.45}
    override = ClusterSpec.load(_write(tmp_path, {"gpus": {"v100": 2}, "prices_per_hour": {"v100": 2.48}}),
                                prices_per_hour={"v100": 3.0})
    assert override.prices_per_hour["v100"] == 3.0
    servers = ClusterSpec.load(_write(tmp_path, {"servers": [
        {"gpu_type": "a100", "gpus": 8, "cpus": 64, "dram_gb": 1024, "count": 2},
        {"gpu_type": "t4", "gpus": 4}], "prices_per_hour": {"a100": 3.67}}))
    assert servers.gpu_types == ("a100", "t4") and servers.num_gpus == 20 and servers.servers[0].cpu_cores == 64


@pytest.mark.parametrize("data, message", [
    ("{not json", "c.json:1: not valid JSON"),
    ({"gpus": {"v100": 4}, "servers": []}, "exactly one of"),
    ({"gpus": {"v100": -1}}, "field 'gpus.v100': expected a positive integer, got -1"),
    ({"gpus": {"v100": 2.5}}, "field 'gpus.v100'"),
    ({"gpus": {"v100": 4}, "prices_per_hour": {"v100": "cheap"}}, "field 'prices_per_hour.v100'"),
    ({"gpus": {"v100": 4}, "gpus_per_server": {"k80": 2}}, "not in 'gpus'"),
    ({"gpus": {"v100": 4}, "colour": "red"}, "unknown field(s) ['colour']"),
    ({"servers": [{"gpu_type": "v100"}]}, "field 'servers[0]'"),
])
def test_bad_files_name_the_file_and_field(tmp_path, data, message):
    with pytest.raises(SpecError, match="c.json") as info:
        ClusterSpec.load(_write(tmp_path, data))
    assert message in str(info.value)


def test_cost_policy_uses_the_files_prices(tmp_path, capsys):
    cluster = _write(tmp_path, {"gpus": {"v100": 2, "p100": 2, "k80": 2},
                                "prices_per_hour": {"v100": 2.48, "p100": 1.46, "k80": 0.45}})
    args = ["simulate", "--policy", "max_sum_throughput_normalized_by_cost_perf", "--generate", "gavel", "--static",
            "--num-jobs", "6", "--cluster", cluster, "--json"]
    assert main(args) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["total_cost"] > 0 and row["config"]["prices_per_hour"]["v100"] == 2.48
    assert main(args + ["--prices", "v100=5,p100=1.46,k80=0.45"]) == 0
    assert json.loads(capsys.readouterr().out)["config"]["prices_per_hour"]["v100"] == 5.0
