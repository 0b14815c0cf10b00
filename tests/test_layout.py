"""The package's layout keeps its design visible: modules by role, none of them long."""

from __future__ import annotations

from pathlib import Path

import hetsched

ROOT = Path(hetsched.__file__).parent
ROLES = {"cli", "core", "experiments", "io", "model", "planner", "policies", "rates", "resources", "sim", "solvers",
         "traces", "ui"}
TOP_LEVEL = {"__init__.py", "__main__.py", "errors.py"}
MAX_LINES = 410


def test_modules_live_in_folders_by_role():
    folders = {p.name for p in ROOT.iterdir() if p.is_dir() and p.name != "__pycache__"}
    files = {p.name for p in ROOT.glob("*.py")}
    assert folders == ROLES, f"unexpected folders {folders ^ ROLES}"
    assert files == TOP_LEVEL, f"modules outside a role folder: {sorted(files - TOP_LEVEL)}"


def test_no_module_is_long():
    long = {str(p.relative_to(ROOT)): n for p in ROOT.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"split these modules (over {MAX_LINES} lines): {long}"


def test_public_names_import_from_the_package():
    from hetsched import ClusterSpec, Job, ThroughputTable, load_throughputs  # noqa: F401
    from hetsched.core.registry import make_policy
    from hetsched.sim.simulator import simulate

    result = simulate([Job(0, 0.0, "ResNet-18 (batch size 64)", 1, 1000)], ClusterSpec.load("1:0:0"),
                      make_policy("fifo"))
    assert result.jobs_frame()["job_id"].tolist() == [0]
