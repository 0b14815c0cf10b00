"""The policy name flows down the stages' diagram (docs/architecture.md#stages): from `hetsched simulate` to the
scheduler's construction, each module that handles the name (a frame of the package with the name among its local
values) sits at the same layer as the one before it or below, and no folder is visited twice: the name is resolved
once (`registry.resolve`), the stage objects are built once, and nothing above them is asked again. (The cases
avoid names that are also a generator's or a system's rules, `gavel` and `shockwave`: those are other words.)"""

from __future__ import annotations

import sys

import pytest

from hetsched.cli.main import main
from hetsched.core.scheduler import Scheduler

#: Folders by layer of docs/architecture.md's diagram (0 = the entry points).
LAYERS = {"cli": 0, "ui": 0, "experiments": 0, "sim": 1, "core": 2, "decide": 3, "select": 4, "place": 5, "rates": 6,
          "rounds": 7, "stages": 8, "model": 9, "io": 9, "traces": 9, "compiled": 9, "solvers": 9}

CASES = {
    "Max_Min_Fairness_PERF": ["--generate", "gavel", "--jobs-per-hour", "4", "--cluster", "2:2:2"],
    "gavel+TUNE": ["--generate", "synergy", "--jobs-per-hour", "4", "--cluster", "1x4/24/500@v100+1x4/24/500@k80"],
    "fifo+tune": ["--generate", "synergy", "--jobs-per-hour", "4", "--cluster", "1x4/24/500@v100"],
    "shockwave_AGNOSTIC": ["--generate", "gavel", "--static", "--cluster", "4:0:0"],
    "gavel_las": ["--generate", "gavel", "--jobs-per-hour", "4", "--cluster", "2:2:2", "--partitions", "2"],
}


def _importing(frame) -> bool:
    """A module's import registers names (the policies' catalogue): not the flow of a run's name."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


class _Built(Exception):
    """The scheduler is being built: the flow ends here."""


def _folders_that_handle(spelling: str, args: list[str]) -> list[str]:
    from hetsched.core.registry import policy_for

    text = policy_for(spelling, 0).name           # the registry's spelling (`max_min_fairness_perf+tune`)
    names = {spelling.casefold(), text.casefold(), text.split("+")[0].casefold()}
    seen: list[str] = []

    def profile(frame, event, arg):
        if event != "call" or "/hetsched/" not in frame.f_code.co_filename:
            return
        if frame.f_code is Scheduler.__init__.__code__:
            raise _Built
        if any(isinstance(v, str) and v.casefold() in names for v in frame.f_locals.values()) and not _importing(frame):
            folder = frame.f_code.co_filename.split("/hetsched/")[1].split("/")[0]
            if not seen or seen[-1] != folder:
                seen.append(folder)

    sys.setprofile(profile)
    try:
        main(["simulate", "--policy", spelling, "--num-jobs", "4", *args])
    except _Built:
        return seen
    finally:
        sys.setprofile(None)
    raise AssertionError("the run ended without building a scheduler")


@pytest.mark.parametrize("spelling", sorted(CASES))
def test_the_policy_name_never_climbs_back_up(spelling):
    folders = _folders_that_handle(spelling, CASES[spelling])
    assert folders and folders[0] == "cli", folders
    layers = [LAYERS[f] for f in folders]
    assert layers == sorted(layers) and len(set(folders)) == len(folders), folders
