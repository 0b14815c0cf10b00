"""The README states the times that `benchmarks/stated_times.py` checks, with the numbers it checks them against."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_readme_states_the_benchmarked_times():
    spec = importlib.util.spec_from_file_location("stated_times", ROOT / "benchmarks" / "stated_times.py")
    stated = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stated)
    text = " ".join((ROOT / "README.md").read_text().split())
    _, cpu, wall = stated.STATED["compare-quick"]
    assert f"quick {cpu:g} CPU-s and {wall:g} s wall" in text
