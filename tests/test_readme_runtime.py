"""The README's runtime example runs as written: a scheduler and emulated workers on loopback, six small jobs, all
completed, and nothing left running once its `with` block ends."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from machine import scaled

README = Path(__file__).resolve().parents[1] / "README.md"
CHECK = """
import json, os
{code}
print(json.dumps({{"states": final["state"].tolist(), "steps": final["steps_done"].tolist(),
                   "scheduler_alive": cluster.scheduler.poll() is None,
                   "workers_alive": [w.poll() is None for w in cluster.workers]}}))
"""


def _example() -> str:
    section = README.read_text(encoding="utf-8").split("## Running on real workers", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_runtime_example_runs_as_written(tmp_path):
    code = _example()
    assert "emulate=True" in code and "with launch_local_cluster(" in code
    run = subprocess.run([sys.executable, "-c", CHECK.format(code=code)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=scaled(300))
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["states"] == ["completed"] * 6 and out["steps"] == [300] * 6
    assert not out["scheduler_alive"] and not any(out["workers_alive"])
    assert (tmp_path / "outputs" / "runtime").is_dir()         # relative to where it runs: nothing elsewhere


def test_the_status_view_says_where_a_job_runs_and_why_its_steps_fell():
    import pandas as pd

    from hetsched.runtime.status_view import STATUS_COLUMNS, status_view

    row = dict(job_id=3, state="running", steps_done=1200, durable_steps=1000, total_steps=4000, attempts=0,
               submitted_s=1_000.0, finished_s=None, log_tail="", batch_size=0, gpu_type="v100", workers="w1,w2")
    last: dict[int, int] = {}
    first = status_view(pd.DataFrame([row], columns=STATUS_COLUMNS), last, now_s=4_725.0).iloc[0]
    shown = (first["GPU type"], first["workers"], first["done"], first["elapsed"])
    assert shown == ("v100", "w1,w2", "30 %", "1:02:05")
    assert first["steps"] == "1,200 of 4,000 (1,000 saved)" and first["note"] == ""
    fell = status_view(pd.DataFrame([{**row, "steps_done": 1000}], columns=STATUS_COLUMNS), last, 4_800.0).iloc[0]
    assert fell["note"] == "back to its checkpoint (1,200 -> 1,000 steps)"
