"""Shared fixtures: where the artifacts' public files live (../shared beside the repository)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _shared() -> Path:
    return Path(os.environ.get("HETSCHED_SHARED", REPO.parent / "shared"))


def pinned_versions(text: str) -> dict[str, str]:
    """`name==version` lines of a pip constraints file (comments and blank lines skipped)."""
    pins = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            if not sep:
                raise ValueError(f"constraints.txt: not name==version: {line!r}")
            pins[name.strip().lower()] = version.strip()
    return pins


def numerics_header(pins: dict[str, str], installed) -> list[str]:
    """pytest's header lines: the numerical packages' installed versions, and those that differ from the pins
    (`installed(name)` gives a version or None)."""
    have = {name: installed(name) or "missing" for name in pins}
    lines = ["pinned: " + ", ".join(f"{name} {have[name]}" for name in pins)]
    differ = [f"{name} {have[name]} (pinned {pins[name]})" for name in pins if have[name] != pins[name]]
    if differ:
        lines.append("versions differ from constraints.txt; a numerical package's may move results within the "
                     "fidelity tolerances instead of repeating bit for bit: " + "; ".join(differ))
    return lines


def pytest_report_header(config):
    from importlib.metadata import PackageNotFoundError, version

    def installed(name):
        try:
            return version(name)
        except PackageNotFoundError:
            return None
    path = REPO / "constraints.txt"
    return numerics_header(pinned_versions(path.read_text()), installed) if path.exists() else []


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The artifacts' data and fidelity cases. CI always has them; a missing folder fails there."""
    path = _shared()
    if not (path / "fidelity").is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"shared folder not found at {path} (set HETSCHED_SHARED)")
        pytest.skip(f"shared folder not found at {path}")
    return path


@pytest.fixture(scope="session", autouse=True)
def _own_cache_dir(tmp_path_factory):
    """Per-user caches (hetsched/ui/html.py) go to the session's temporary folder, not the user's home; the
    notebooks' kernels inherit it."""
    if "HETSCHED_CACHE_DIR" not in os.environ:
        os.environ["HETSCHED_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    yield


@pytest.fixture(scope="session")
def gavel_table():
    from hetsched import load_throughputs

    return load_throughputs("gavel_simulation")


@pytest.fixture(scope="session")
def _notebook_runs(tmp_path_factory):
    """The tiny-preset run behind `runs`, as ("ok", value) or ("failed", why): never raised here, so that a
    failed run is reported once (by `runs`), not by every test that needs it."""
    from hetsched.experiments.reproduce import NotebookRun, reproduce

    try:
        reuse = os.environ.get("HETSCHED_NOTEBOOK_RUNS")
        if reuse:
            import json
            rows = json.loads((Path(reuse) / "runs.json").read_text())
            assert all(r["preset"] == "tiny" for r in rows.values()), "HETSCHED_NOTEBOOK_RUNS: not a tiny-preset run"
            return "ok", (Path(reuse), {n: NotebookRun(**{**r, "out_dir": Path(reuse) / r["out_dir"]})
                                        for n, r in rows.items()})
        out = tmp_path_factory.mktemp("outputs")
        params = {"use_dask": False, "cache_dir": str(out / "cache")}   # the sweep's Dask path: test_sweep.py
        return "ok", (out, {r.name: r for r in reproduce("tiny", None, out, params)})
    except BaseException as exc:          # pytest-timeout's Failed included: one report, below
        return "failed", f"{type(exc).__name__}: {exc}"


_reported: list[str] = []


@pytest.fixture
def runs(_notebook_runs, request):
    """Every figure notebook executed once at the tiny preset: (output folder, {name: NotebookRun}).
    HETSCHED_NOTEBOOK_RUNS=DIR reuses a finished `hetsched reproduce --preset tiny --out DIR` (while iterating).
    If the run itself fails, the first test that needs it fails with the reason and the others are skipped,
    naming that test: one failure, not one per notebook test."""
    status, value = _notebook_runs
    if status == "ok":
        return value
    if not _reported:
        _reported.append(request.node.nodeid)
        pytest.fail(f"the notebooks' tiny-preset run failed: {value}", pytrace=False)
    pytest.skip(f"the notebooks' tiny-preset run failed (reported by {_reported[0]})")


def pytest_collection_modifyitems(config, items):
    """The notebook tests' time limit (the shared run is set up inside the first of them) is scaled by the
    machine's measured slowness: a loaded machine needs longer, and a limit is a bound, not a speed check."""
    from machine import slowness

    limit = None
    for item in items:
        if item.nodeid.startswith(NOTEBOOK_TESTS) and item.get_closest_marker("timeout") is None:
            limit = limit or int(config.getini("timeout") or 900) * slowness()
            item.add_marker(pytest.mark.timeout(limit))


@pytest.fixture(scope="session")
def dask_cli(tmp_path_factory):
    """A Dask cluster started as a user starts one on several machines (`dask scheduler`, then `dask worker` on
    each), here two single-thread workers on loopback; yields the scheduler's address. Stopped afterwards."""
    import json
    import subprocess
    import sys
    import time

    from hetsched.runtime.launch import stop_group
    folder = tmp_path_factory.mktemp("dask")
    dask = str(Path(sys.executable).with_name("dask"))
    info = folder / "scheduler.json"
    logs = [open(folder / f"{name}.log", "wb") for name in ("scheduler", "worker-a", "worker-b")]
    common = ["--host", "127.0.0.1", "--no-dashboard"]
    procs = [subprocess.Popen([dask, "scheduler", "--port", "0", "--scheduler-file", str(info), *common],
                              stdout=logs[0], stderr=subprocess.STDOUT, start_new_session=True)]
    try:
        deadline = time.monotonic() + 60
        while not info.exists():
            assert time.monotonic() < deadline and procs[0].poll() is None, (folder / "scheduler.log").read_text()
            time.sleep(0.1)
        for log in logs[1:]:
            procs.append(subprocess.Popen([dask, "worker", "--scheduler-file", str(info), "--nworkers", "1",
                                           "--nthreads", "1", *common], stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True))
        from dask.distributed import Client
        address = json.loads(info.read_text())["address"]
        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=120)
        yield address
    finally:
        for proc in reversed(procs):
            stop_group(proc, timeout=20)
        for log in logs:
            log.close()


# With `-n 3` (make test), the notebook tests run on one worker: they share the session's tiny-preset run (`runs`,
# about 190 s), which would otherwise run once per worker. Every other test is its own unit of work, as with
# `--dist load`. (pytest-xdist's `loadgroup` cannot do this under pytest 9: it renames `item._nodeid`, which pytest
# 9 no longer reads, so its groups are silently ignored.)
NOTEBOOK_TESTS = ("tests/test_notebooks.py::", "tests/test_notebook_numbers.py::")


def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class NotebooksOnOneWorker(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "notebooks" if nodeid.startswith(NOTEBOOK_TESTS) else nodeid

    return NotebooksOnOneWorker(config, log)
