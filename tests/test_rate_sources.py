"""One catalogue of job types (docs/rules.md#catalogues): a model's names are one family, and a job a table cannot
time is refused naming the sources that can."""

from __future__ import annotations

import pytest

from hetsched import load_throughputs
from hetsched.cli.main import main
from hetsched.model import rate_sources as R
from hetsched.model.throughputs import available_datasets, data_dir


def family(job_type):
    return R.family(job_type, data_dir())


def rate_sources(job_type):
    return R.rate_sources(job_type, {n: load_throughputs(n).job_types for n in available_datasets()}, data_dir())


SYNERGY_STREAM = ["--generate", "synergy", "--num-jobs", "12", "--jobs-per-hour", "6", "--cluster", "2x8/24/500@v100"]


@pytest.mark.parametrize("spelling", ["ResNet-18", "resnet18", "RES18", "res_18", "ResNet-18 (batch size 64)"])
def test_a_models_names_are_one_family(spelling):
    assert family(spelling) == "ResNet-18"


def test_a_closest_profile_is_not_the_same_model():
    assert family("CycleGAN") == "CycleGAN" and family("res50") == "ResNet-50"


def test_sources_name_the_tables_and_profiles_that_time_a_type():
    assert rate_sources("alexnet") == ["Synergy's profiles (an ordering under Synergy's rules, e.g. 'fifo+tune' "
                                       "--rules synergy)"]
    assert "gavel_simulation" in rate_sources("lstm")[0]
    assert rate_sources("no-such-model") == []
    assert "'ResNet-18 (batch size 16)'" in load_throughputs().lacks("res18", 1)


def test_synergys_stream_runs_under_its_ordering_and_gavels_las_names_where_its_rates_are(capsys):
    assert main(["simulate", "--policy", "las+fair", *SYNERGY_STREAM]) == 0
    capsys.readouterr()
    assert main(["simulate", "--policy", "gavel_las+fair", *SYNERGY_STREAM]) == 2
    err = capsys.readouterr().err
    assert "not in the throughput table 'gavel_simulation'" in err and "its rates exist in Synergy's profiles" in err
