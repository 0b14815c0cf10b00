import json

import numpy as np
import pytest

from hetsched import JobKey, ThroughputError, ThroughputTable, load_throughputs
from hetsched.io.throughput_json import read_throughput_json
from hetsched.model.throughputs import available_datasets

SHARED_TABLES = {
    "gavel_simulation": "gavel/simulation_throughputs.json",
    "gavel_physical": "gavel/physical_cluster_throughputs.json",
    "gavel_oracle": "gavel/oracle_throughputs.json",
    "shockwave_tacc": "shockwave/tacc_throughputs.json",
    "shockwave_wisr": "shockwave/wisr_throughputs.json",
}


def test_datasets_are_present():
    assert set(SHARED_TABLES) <= set(available_datasets())


@pytest.mark.parametrize("name", sorted(SHARED_TABLES))
def test_committed_table_equals_a_fresh_conversion(shared_dir, name):
    """data/ holds exactly what the converter makes of the artifact's file (provenance is reproducible)."""
    fresh = read_throughput_json(shared_dir / "data" / SHARED_TABLES[name])
    committed = load_throughputs(name).to_frame()
    assert committed.equals(fresh)


def test_known_values(gavel_table):
    # spec/gavel.md s.4.5 table (two decimals) and the artifact's raw values.
    assert gavel_table.get("ResNet-18 (batch size 16)", 1, "v100") == pytest.approx(32.35, abs=0.01)
    assert gavel_table.get("Recommendation (batch size 512)", 1, "p100") == pytest.approx(48.88, abs=0.01)
    assert gavel_table.get("ResNet-50 (batch size 128)", 2, "k80") == 0.0
    assert gavel_table.get("LM (batch size 5)", 8, "v100") == pytest.approx(699, abs=1)
    assert gavel_table.gpu_types == ("k80", "p100", "v100")
    assert len(gavel_table.keys) == 83


def test_unconsolidated_and_missing(gavel_table):
    uncons = gavel_table.get("ResNet-18 (batch size 16)", 4, "v100", consolidated=False)
    assert uncons > 0
    with pytest.raises(ThroughputError, match="not measured"):
        gavel_table.get("ResNet-50 (batch size 64)", 2, "k80", consolidated=False)
    with pytest.raises(ThroughputError, match="no entry"):
        gavel_table.get("BERT (batch size 8)", 1, "v100")
    with pytest.raises(ThroughputError, match="no GPU type"):
        gavel_table.get("A3C", 1, "a100")


def test_pairs_are_mirrored(gavel_table):
    a, b = "ResNet-18 (batch size 32)", "LM (batch size 20)"
    ta, tb = gavel_table.pair(a, b, 1, "v100")
    assert (tb, ta) == gavel_table.pair(b, a, 1, "v100")
    assert 0 < ta <= gavel_table.get(a, 1, "v100")
    assert gavel_table.pair(a, b, 2, "v100") == (0.0, 0.0)  # multi-GPU pairs are all zero in the artifact


def test_matrix_is_vectorised_lookup(gavel_table):
    keys = [JobKey("A3C", 1), JobKey("LM (batch size 5)", 2)]
    m = gavel_table.matrix(keys, ["v100", "k80"])
    assert m.shape == (2, 2)
    assert m[1, 0] == gavel_table.get("LM (batch size 5)", 2, "v100")
    assert not m.flags.writeable or m.base is not gavel_table.isolated


def test_table_is_read_only(gavel_table):
    with pytest.raises(ValueError):
        gavel_table.isolated[0, 0, 0] = 1.0


def test_user_json_round_trip(tmp_path):
    data = {"a100": {"('Net (batch size 8)', 1)": {"null": 10.0, "('Net (batch size 8)', 1)": [6.0, 6.5]},
                     "('Net (batch size 8)', 2)": {"null": 19.0}},
            "a100_unconsolidated": {"('Net (batch size 8)', 2)": {"null": 15.0}}}
    src = tmp_path / "user.json"
    src.write_text(json.dumps(data))
    table = ThroughputTable.read(src)
    assert table.get("Net (batch size 8)", 2, "a100", consolidated=False) == 15.0
    assert table.pair("Net (batch size 8)", "Net (batch size 8)", 1, "a100") == (6.0, 6.5)
    for suffix in (".parquet", ".csv"):
        out = tmp_path / f"t{suffix}"
        table.write(out)
        again = ThroughputTable.read(out)
        assert again.keys == table.keys
        np.testing.assert_array_equal(again.isolated, table.isolated)
        np.testing.assert_array_equal(again.colocated, table.colocated)


@pytest.mark.parametrize("content, message", [
    ("not json", "not a readable JSON"),
    ("[]", "JSON object"),
    ('{"v100": {"(\'X\', 1)": {"other": 1}}}', "'null'"),
    ('{"v100": {"(\'X\', 1)": {"null": -2}}}', "non-negative"),
    ('{"v100": {"(\'X\', 1)": {"null": 2, "(\'Y\', 2)": [1, 1]}}}', "equal scale factors"),
    ('{"v100": {"(\'X\', 1)": {"null": 2, "(\'Y\', 1)": 3}}}', r"\[self, other\]"),
    ('{"v100": {"(X, one)": {"null": 2}}}', "cannot parse job key"),
])
def test_bad_json_raises_throughput_error(tmp_path, content, message):
    src = tmp_path / "bad.json"
    src.write_text(content)
    with pytest.raises(ThroughputError, match=message):
        ThroughputTable.read(src)


def test_unknown_dataset_lists_the_known_ones():
    with pytest.raises(ThroughputError, match="gavel_simulation"):
        load_throughputs("no_such_dataset")

