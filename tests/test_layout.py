"""The package's layout keeps its design visible: modules by role, none of them long."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import hetsched

ROOT = Path(hetsched.__file__).parent
ROLES = {"cli", "compiled", "core", "decide", "experiments", "io", "model", "place", "rates", "rounds", "select", "sim",
         "solvers", "stages", "traces", "ui"}
#: docs/architecture.md#folders: the entry points and drivers above the core, the stages below it in the diagram's
#: order, their interfaces (stages/) below them.
ABOVE_THE_STAGES = {"cli", "ui", "experiments", "sim", "core"}
STAGE_ORDER = ("decide", "select", "place", "rates", "rounds")
STAGE_FOLDERS = set(STAGE_ORDER)
VOCABULARY = {"model", "io", "traces", "compiled", "solvers"}      # tables, files, job streams, kernels, solvers
TOP_LEVEL = {"__init__.py", "__main__.py", "errors.py"}
MAX_LINES = 410


def test_modules_live_in_folders_by_role():
    folders = {p.name for p in ROOT.iterdir() if p.is_dir() and p.name != "__pycache__"}
    files = {p.name for p in ROOT.glob("*.py")}
    assert folders == ROLES, f"unexpected folders {folders ^ ROLES}"
    assert files == TOP_LEVEL, f"modules outside a role folder: {sorted(files - TOP_LEVEL)}"


def test_the_compiled_loops_import_no_stage():
    """hetsched/compiled sits below the core: every stage may call its loops (policies no longer import them from
    the core they are called by), and it imports nothing of the package but itself."""
    found = {p.name: sorted(set(re.findall(r"(?:from|import) (hetsched\.\w+)", p.read_text())) - {"hetsched.compiled"})
             for p in (ROOT / "compiled").glob("*.py")}
    assert not any(found.values()), found
    policies = {p.name for p in (ROOT / "decide").rglob("*.py")
                if re.search(r"from hetsched\.core(\.| import )(kernels|jit|round_kernels)", p.read_text())}
    assert not policies, policies


def test_the_scheduler_is_one_class_that_holds_its_stages():
    """docs/architecture.md: no mixins; the scheduler's parts are objects it holds and calls."""
    from hetsched.core.scheduler import Scheduler

    assert Scheduler.__bases__ == (object,), Scheduler.__bases__


def _imports(folder: str) -> dict[str, set[str]]:
    """Module (path under hetsched/) -> the package's folders it imports, lazy imports included."""
    found = {}
    for p in (ROOT / folder).rglob("*.py"):
        folders = set(re.findall(r"^\s*(?:from|import) hetsched\.(\w+)", p.read_text(), re.M))
        found[str(p.relative_to(ROOT))] = folders - {folder}
    return found


def test_no_stage_imports_the_core_or_anything_above_it():
    """The scheduler calls the stages; the stages implement the interfaces in stages/ and never import back up, nor
    a stage above their own in the diagram (decide, select, place, rates, rounds); the vocabulary below them
    (tables, files, streams, kernels, solvers) imports no stage."""
    climbs = {m: sorted(f & ABOVE_THE_STAGES) for d in STAGE_FOLDERS | {"stages"} for m, f in _imports(d).items()
              if f & ABOVE_THE_STAGES}
    assert not climbs, climbs
    interfaces = {m: sorted(f - {"model", "errors"}) for m, f in _imports("stages").items() if f - {"model", "errors"}}
    assert not interfaces, interfaces
    below = {m: sorted(f - VOCABULARY - {"errors"}) for d in VOCABULARY for m, f in _imports(d).items()
             if f - VOCABULARY - {"errors"}}
    assert not below, below
    upward = {m: sorted(set(STAGE_ORDER[:STAGE_ORDER.index(d)]) & f) for d in STAGE_ORDER for m, f in _imports(d).items()
              if set(STAGE_ORDER[:STAGE_ORDER.index(d)]) & f}
    assert not upward, f"a stage imports a stage above it in the diagram: {upward}"


def test_no_module_is_long():
    long = {str(p.relative_to(ROOT)): n for p in ROOT.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"split these modules (over {MAX_LINES} lines): {long}"


def test_public_names_import_from_the_package():
    from hetsched import ClusterSpec, Job, ThroughputTable, load_throughputs  # noqa: F401
    from hetsched.core.registry import make_policy
    from hetsched.sim.simulator import simulate

    result = simulate([Job(0, 0.0, "ResNet-18 (batch size 64)", 1, 1000)], ClusterSpec.load("1:0:0"),
                      make_policy("gavel_fifo"))
    assert result.jobs_frame()["job_id"].tolist() == [0]


def test_altair_imports_without_building_the_rfc3987_grammar():
    """constraints.txt pins jsonschema below 4.25, whose import builds rfc3987-syntax's Lark grammar (2 s in every
    notebook kernel, as altair imports jsonschema). A newer pin brings the 2 s back; this names it."""
    import subprocess
    import sys

    code = "import sys, altair; print('rfc3987_syntax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "False", "altair's jsonschema imports rfc3987_syntax: see constraints.txt"


def test_constraints_pin_declared_numerical_packages_and_the_header_names_a_drift():
    import tomllib

    from conftest import REPO, numerics_header, pinned_versions

    pins = pinned_versions((REPO / "constraints.txt").read_text())
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())
    declared = {re.split(r"[<>=!~\[ ]", d, maxsplit=1)[0].lower() for d in meta["project"]["dependencies"]}
    assert {"numpy", "scipy", "ecos", "highspy", "numba"} <= set(pins)
    # llvmlite comes with numba; jsonschema with altair (pinned for its import time, see constraints.txt)
    assert set(pins) - declared <= {"llvmlite", "jsonschema"}, "pin only what the project declares or brings"
    for setup in ("Makefile", "environment.yml"):          # make, and conda users
        assert "-c constraints.txt" in (REPO / setup).read_text(), setup
    same = numerics_header(pins, pins.get)
    assert len(same) == 1 and f"numpy {pins['numpy']}" in same[0]
    drift = numerics_header(pins, lambda name: "0.0" if name == "highspy" else pins[name])
    assert len(drift) == 2 and f"highspy 0.0 (pinned {pins['highspy']})" in drift[1] and "numpy" not in drift[1]
    with pytest.raises(ValueError, match="name==version"):
        pinned_versions("numpy>=2")
