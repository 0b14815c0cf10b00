"""The elastic explorer: runs in the background, refuses a second click and a bad cluster visibly, keeps every run."""

from __future__ import annotations

from hetsched.ui.elastic_explorer import ElasticExplorer


def _finish(thread):
    assert thread is not None
    thread.join(timeout=600)
    assert not thread.is_alive()


def test_runs_keep_a_row_each_and_a_second_click_is_refused():
    ex = ElasticExplorer(jobs=6)
    ex.policy.value = "gavel+tj"
    thread = ex.start()
    assert ex.run_button.disabled
    assert ex.start() is None and "already in progress" in ex.status.value
    _finish(thread)
    assert ex.status.value.startswith("Done: 1: Gavel+TJ · helios-1 (first 6 jobs)")
    ex.policy.value = "sia"
    _finish(ex.start())
    assert [r["run"][:6] for r in ex.rows] == ["1: Gav", "2: Sia"]
    assert "<table" in ex.summary.value and len(ex.plots.outputs) == 1
    assert not ex.run_button.disabled


def test_a_bad_cluster_disables_run_and_says_why():
    ex = ElasticExplorer()
    ex.cluster.value = "4x8@h100"
    assert ex.run_button.disabled and "no measurements for GPU type 'h100'" in ex.status.value
    ex.cluster.value = "2x8@a100"
    assert not ex.run_button.disabled and ex.status.value == "Ready."


def test_the_seed_is_pollux_alone():
    ex = ElasticExplorer()
    assert ex.seed.disabled
    ex.policy.value = "pollux"
    assert not ex.seed.disabled


def test_cancel_stops_a_run_and_reset_forgets_the_runs():
    ex = ElasticExplorer(jobs=160)
    ex.policy.value = "pollux"                  # minutes of work: the cancel comes long before its end
    thread = ex.start()
    ex.cancel()
    _finish(thread)
    assert ex.status.value == "Cancelled; earlier runs are kept." and ex.rows == []
    assert not ex.run_button.disabled
    ex.reset()
    assert ex.rows == [] and ex.status.value == "Reset: no runs."
