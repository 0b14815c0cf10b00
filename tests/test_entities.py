"""Entities and their weights, end to end: trace -> simulate -> hierarchical policy, and through the runtime."""

import json
import sqlite3

import pandas as pd
import pytest
from runtime_helpers import RESNET

from hetsched import ClusterSpec, Job
from hetsched.cli.main import main
from hetsched.core.scheduler import Scheduler
from hetsched.model.entities import parse_entity_weights
from hetsched.errors import HetschedError
from hetsched.runtime.state import RuntimeState
from hetsched.runtime.store import Store
from hetsched.runtime.stubs import pb2
from hetsched.sim.simulator import policy_for
from hetsched.model.throughputs import load_throughputs

HEADER = "job_id,user,vc,jobname,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"


@pytest.fixture
def helios_trace(tmp_path):
    rows = [f"{i},u{i % 4},{'teamA' if i % 2 else 'teamB'},x,1,1,1,COMPLETED,2020-04-01 00:00:{i:02d},,,7200,0"
            for i in range(12)]
    path = tmp_path / "cluster_log.csv"
    path.write_text(HEADER + "\n".join(rows) + "\n")
    return path


def _entity_jcts(trace, tmp_path, capsys, *extra):
    out = tmp_path / "jobs.csv"
    assert main(["simulate", "--policy", "max_min_fairness_water_filling_perf", "--cluster", "2:2:2", "--trace",
                 str(trace), "--from", "helios", "--jobs-out", str(out), "--json", *extra]) == 0
    json.loads(capsys.readouterr().out)
    return pd.read_csv(out).groupby("entity").jct_s.mean()


def test_weights_from_a_file_move_jcts_between_teams(helios_trace, tmp_path, capsys):
    even = _entity_jcts(helios_trace, tmp_path, capsys)
    weights = tmp_path / "teams.csv"
    weights.write_text("entity,weight\nteamA,3\nteamB,1\n")
    weighted = _entity_jcts(helios_trace, tmp_path, capsys, "--entity-weights", str(weights))
    assert set(weighted.index) == {"teamA", "teamB"}
    # teamA (weight 3) finishes sooner and teamB later than with equal weights.
    assert weighted["teamA"] < 0.85 * even["teamA"] and weighted["teamB"] > even["teamB"]
    swapped = tmp_path / "swapped.csv"
    swapped.write_text("entity,weight\nteamA,1\nteamB,3\n")
    flipped = _entity_jcts(helios_trace, tmp_path, capsys, "--entity-weights", str(swapped))
    assert flipped["teamB"] < even["teamB"] and flipped["teamA"] > even["teamA"]


def test_weights_that_name_no_entity_of_the_trace_are_refused_or_named(helios_trace, tmp_path, capsys):
    """Weights for entities that no job has, or a policy that shares among none, changed nothing without a word."""
    weights = tmp_path / "w.csv"
    weights.write_text("entity,weight\nteam_a,3\n")                  # a typo for teamA
    args = ["simulate", "--policy", "max_min_fairness_water_filling_perf", "--cluster", "2:2:2", "--trace",
            str(helios_trace), "--from", "helios", "--json", "--entity-weights", str(weights)]
    assert main(args) == 2
    assert f"{weights} weighs team_a, none of them among the entities of {helios_trace} (teamA, teamB): it would " \
        "change nothing" in capsys.readouterr().err
    weights.write_text("entity,weight\nteamA,3\nteamC,2\n")
    assert main(args) == 0
    assert f"warning: {weights} weighs teamC (1 of 2), not among the entities of {helios_trace}" in \
        capsys.readouterr().err
    weights.write_text("entity,weight\nteamA,3\n")
    args[2] = "max_min_fairness_perf"
    assert main(args) == 2
    assert "policy 'max_min_fairness_perf' does not share among entities" in capsys.readouterr().err


def test_entity_user_instead_of_vc(helios_trace, tmp_path, capsys):
    by_user = _entity_jcts(helios_trace, tmp_path, capsys, "--entity", "user")
    assert set(by_user.index) == {"u0", "u1", "u2", "u3"}


@pytest.mark.parametrize("text,match", [
    ("team,weight\na,1\n", r"w.csv:1: expected a header 'entity,weight'"),
    ("entity,weight\na,0\n", r"w.csv:2: field 'weight': expected a positive number"),
    ("entity,weight\na,1\na,2\n", r"w.csv:3: field 'entity': 'a' is listed twice"),
    ("entity,weight\n,1\n", r"w.csv:2: field 'entity': empty"),
])
def test_bad_weight_files(text, match):
    with pytest.raises(HetschedError, match=match):
        parse_entity_weights(text, "w.csv")


def test_the_core_gives_hierarchical_policies_entity_codes_and_weights_only():
    table = load_throughputs("gavel_simulation")
    jobs = [Job(i, 0.0, RESNET, 1, 1000, entity=("a", "b", None)[i % 3]) for i in range(6)]
    core = Scheduler(ClusterSpec.parse("2:2:2"), policy_for("max_min_fairness_water_filling_perf", 0), table,
                     entity_weights={"b": 4.0})
    for j in jobs:
        core.add_job(j)
    view = core.view(0.0)
    names = ["", "a", "b"]                                # no entity is one default entity, weight 1
    assert [names[c] for c in view.entity] == [("a", "b", "")[i % 3] for i in range(6)]
    assert view.entity_weight.tolist() == [1.0, 1.0, 4.0]
    flat = Scheduler(ClusterSpec.parse("2:2:2"), policy_for("max_min_fairness_perf", 0), table)
    for j in jobs:
        flat.add_job(j)
    assert flat.view(0.0).entity is None                  # other policies never pay for entities


def test_runtime_keeps_entities_through_submit_storage_and_admission(tmp_path):
    table = load_throughputs("gavel_simulation")
    state = RuntimeState(Store(tmp_path / "s.sqlite"), "max_min_fairness_water_filling_perf", 10.0, table,
                         entity_weights={"teamA": 2.0})
    state.register("v100", 2, "w")
    for i, team in enumerate(("teamA", "teamB", "")):
        state.submit(pb2.SubmitJobRequest(job_id=i, job_type=RESNET, scale_factor=1, total_steps=1000,
                                          priority_weight=1, command="emulated", entity=team))
    state.round(state.now() + 10)
    assert [state.core.jobs[i].entity for i in range(3)] == ["teamA", "teamB", None]
    view = state.core.view(0.0)
    assert view.entity_weight.tolist() == [1.0, 2.0, 1.0]      # '', teamA, teamB
    assert [r.entity for r in Store(tmp_path / "s.sqlite").jobs()] == ["teamA", "teamB", ""]


def test_the_runtime_refuses_entity_weights_for_a_flat_policy_before_any_worker_joins(tmp_path):
    """`hetsched scheduler --policy gavel --entity-weights w.csv` listened, and the weights went nowhere."""
    with pytest.raises(HetschedError, match="'max_min_fairness_perf' does not share among entities"):
        RuntimeState(Store(tmp_path / "s.sqlite"), "max_min_fairness_perf", 10.0, load_throughputs("gavel_simulation"),
                     entity_weights={"teamA": 2.0})


def test_store_from_before_entities_gains_the_column(tmp_path):
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.executescript("""CREATE TABLE jobs (job_id INTEGER PRIMARY KEY, job_type TEXT NOT NULL,
        scale_factor INTEGER NOT NULL, total_steps INTEGER NOT NULL, priority_weight REAL NOT NULL,
        command TEXT NOT NULL, state TEXT NOT NULL, steps_done INTEGER NOT NULL DEFAULT 0,
        attempts INTEGER NOT NULL DEFAULT 0, submitted_s REAL NOT NULL, finished_s REAL,
        log_tail TEXT NOT NULL DEFAULT '');
        INSERT INTO jobs (job_id, job_type, scale_factor, total_steps, priority_weight, command, state, submitted_s)
        VALUES (0, 'A3C', 1, 10, 1.0, 'x', 'queued', 1.0);""")
    db.commit()
    db.close()
    rows = Store(path).jobs()
    assert rows[0].job_id == 0 and rows[0].entity == ""
