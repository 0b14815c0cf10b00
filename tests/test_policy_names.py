"""Names with one meaning (docs/rules.md#names): every name `hetsched policies` lists means the same in any case,
no two names are equal when case is ignored, and the ordering words are Synergy's."""

from __future__ import annotations

import pytest

from hetsched.core.registry import make_policy, policy_for, resolve_policy_name
from hetsched.errors import HetschedError
from hetsched.decide.gavel.base import ALIASES, POLICIES, register_policy
from hetsched.decide.synergy.ordering import ORDERINGS, ResourcePolicy, register_ordering, Ordering
from hetsched.ui.names import vocabulary_frame


def _listed() -> list[str]:
    frame = vocabulary_frame()
    aliases = [a.strip() for cell in frame["aliases"] for a in cell.split(",") if a.strip()]
    return [*frame["policy"], *aliases]


def _spellings(name: str) -> list[str]:
    return [name, name.lower(), name.upper(), name.swapcase(), name.title()]


def _meaning(name: str) -> tuple[str, str, str]:
    policy = policy_for(name, seed=0)
    return type(policy).__name__, policy.name, repr(getattr(policy, "ordering", None).__class__)


@pytest.mark.parametrize("name", _listed())
def test_every_listed_name_means_the_same_in_any_case(name):
    meaning = _meaning(name)
    for spelling in _spellings(name):
        assert resolve_policy_name(spelling) == resolve_policy_name(name), spelling
        assert _meaning(spelling) == meaning, spelling


def test_no_two_names_are_equal_ignoring_case():
    names = [*POLICIES, *ALIASES, *ORDERINGS]
    folded = [n.casefold() for n in names]
    assert len(set(folded)) == len(folded), sorted(n for n in names if folded.count(n.casefold()) > 1)


@pytest.mark.parametrize("word", ["fifo", "las", "srtf", "ftf", "drf", "tetris"])
def test_the_ordering_words_are_synergys_orderings(word):
    for spelling in _spellings(word) + [f"{word}+tune", f"{word.upper()}+Fair"]:
        policy = make_policy(spelling)
        assert isinstance(policy, ResourcePolicy) and policy.ordering.name == word.upper(), spelling


def test_gavels_fifo_and_las_are_spelled_with_the_system():
    assert make_policy("gavel_fifo", seed=0).name == "gavel_fifo"
    assert make_policy("GAVEL_LAS").name == "max_min_fairness"
    assert make_policy("gavel_las+fair").name == "max_min_fairness+fair"
    with pytest.raises(HetschedError, match="did you mean 'gavel_fifo'"):
        make_policy("gavel_fif")


def test_a_name_equal_to_another_ignoring_case_cannot_be_registered():
    with pytest.raises(ValueError, match="taken"):
        register_policy("Max_Min_Fairness", lambda **kw: None)
    with pytest.raises(ValueError, match="taken"):
        register_policy("Tetris", lambda **kw: None)

    class Gandiva(Ordering):
        name = "GANDIVA"

        def keys(self, v):
            return v.arrival
    with pytest.raises(HetschedError, match="already a policy's name"):
        register_ordering(Gandiva)
    assert "GANDIVA" not in ORDERINGS


def test_a_name_with_an_empty_part_is_refused_not_built_as_nothing():
    """`fifo+` once built no policy at all (None) and crashed in the registry; it is an unknown name."""
    from hetsched.cli.main import main

    for name in ("fifo+", "FIFO++tune"):
        with pytest.raises(HetschedError, match="unknown policy"):
            policy_for(name, seed=0)
    assert main(["simulate", "--policy", "fifo+", "--generate", "synergy", "--num-jobs", "3", "--jobs-per-hour", "4",
                 "--cluster", "1x4/24/500@v100"]) == 2
