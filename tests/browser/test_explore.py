"""The explorer in a real browser: JupyterLab on 127.0.0.1 with a token, driven by Playwright in Chromium.

Opens notebooks/explore.ipynb, runs four 300-job runs on 8:8:8 with different policies, overlays them, steps one
round after changing the policy, exports, and checks that every chart rendered and no error shows. Saves
outputs/explore.png.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import time
from pathlib import Path

import pandas as pd
import pytest

from jupyter_lab import get, jupyter_lab

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = pytest.mark.browser


@pytest.fixture
def jupyter(tmp_path):
    # Autosave off: the test saves once, at its end, to check that a save leaves the notebook as committed.
    with jupyter_lab(tmp_path, REPO, {"notebook-extension/tracker": {"autoStartDefaultKernel": True},
                                      "docmanager-extension/plugin": {"autosave": False},
                                      "apputils-extension/notification": {"fetchNews": "false"}}) as server:
        yield server


def _wait_for_kernel(base: str, token: str, timeout: float = 90) -> None:
    """Sending keys before the kernel's websocket is up loses them: wait for a connected kernel."""
    deadline = time.monotonic() + timeout
    kernels = None
    while time.monotonic() < deadline:
        try:        # the kernels API answers 500 while a kernel is still starting on a loaded machine
            kernels = get(f"{base}/api/kernels?token={token}")
        except OSError as exc:
            kernels = repr(exc)
        else:
            if kernels and all(k.get("connections", 0) > 0 and k.get("execution_state") == "idle" for k in kernels):
                return
        time.sleep(0.5)
    pytest.fail(f"no connected idle kernel after {timeout} s: {kernels}")


def _rendered_charts(page) -> int:
    """Charts that Vega drew (SVG with marks) in the explorer's chart area."""
    return page.evaluate("""() => [...document.querySelectorAll('.hetsched-charts .vega-embed svg')]
        .filter(s => s.querySelectorAll('path, line, rect').length > 5).length""")


def test_explorer_runs_in_the_browser(jupyter):
    """300 jobs on 8:8:8, four overlaid runs, stepping after a policy change, export; every chart renders."""
    from playwright.sync_api import expect, sync_playwright

    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: `make test` installs it with apt-get (needs root)")
        pytest.skip("chromium is not installed (the Makefile installs it)")
    before = (REPO / "notebooks" / "explore.ipynb").read_bytes()
    base, token = jupyter
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1600})
            page.set_default_timeout(90_000)
            # expect() has its own 5 s default; the first widgets appear only after the kernel has imported
            # hetsched, which takes longer than that while the other xdist worker is busy.
            expect.set_options(timeout=90_000)
            requests = []
            page.on("request", lambda r: requests.append(r.url))
            page.goto(f"{base}/lab/tree/notebooks/explore.ipynb?token={token}")
            page.wait_for_selector(".jp-Notebook .jp-Cell")
            _wait_for_kernel(base, token)
            page.locator(".jp-Notebook .jp-Cell").last.click()
            page.get_by_role("menuitem", name="Run", exact=True).click()
            page.get_by_text("Run All Cells", exact=True).click()

            def field(label: str):
                exact = re.compile(f"^{re.escape(label)}$")
                return page.locator(".widget-inline-hbox", has=page.locator("label", has_text=exact)).locator(
                    "input, select").first

            expect(field("v100")).to_be_visible()
            assert [field(t).input_value() for t in ("v100", "p100", "k80")] == ["8", "8", "8"]
            field("jobs").fill("300")
            field("jobs").press("Tab")
            run = page.locator("button.jupyter-button", has_text="Run").first
            summary = page.locator(".widget-html-content", has_text="average JCT")
            policy = field("policy")
            runs = [("max_min_fairness_perf", "Gavel"), ("max_min_fairness", "LAS"),
                    ("finish_time_fairness_perf", "Gavel (FTF)"), ("gandiva", "Gandiva")]
            for i, (name, shown) in enumerate(runs, start=1):
                policy.select_option(label=f"{shown} ({name})")
                run.click()
                expect(summary).to_contain_text(f"{i}: {shown} · gavel 2 jobs/h · 300 jobs · seed 0 · rules gavel",
                                                timeout=120_000)
                expect(summary).to_contain_text("300 jobs")
            charts = page.locator(".hetsched-charts")
            for i, (_, shown) in enumerate(runs, start=1):         # every run in the legend, never clipped
                expect(charts.locator("svg text", has_text=f"{i}: {shown} ·").first).to_be_visible()
            assert _rendered_charts(page) >= 1

            page.locator("button.jupyter-button", has_text="Step one round").click()
            view = page.locator(".jp-OutputArea-output", has_text="t = 0.00 h")
            expect(view.first).to_contain_text("Gandiva: t = 0.00 h")
            policy.select_option(label="Gavel w/ SS (max_min_fairness_packed)")
            expect(page.locator(".widget-html-content", has_text="stepping starts over")).to_have_count(1)
            page.locator("button.jupyter-button", has_text="Step one round").click()
            expect(page.locator(".jp-OutputArea-output", has_text="Gavel w/ SS: t = 0.00 h").first).to_be_visible()
            expect(page.locator(".widget-html-content", has_text="Stepping Gavel w/ SS")).to_have_count(1)

            page.locator("button.jupyter-button", has_text="Export").click()
            expect(page.locator(".widget-html-content", has_text="Exported:")).to_contain_text("runs.parquet")

            text = page.locator(".jp-Notebook").inner_text()
            for bad in ("Error", "Traceback", "Javascript Error", "MaxRowsError"):
                assert bad not in text, bad
            assert not page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").count()
            (REPO / "outputs").mkdir(exist_ok=True)
            page.screenshot(path=str(REPO / "outputs" / "explore.png"), full_page=True)
            offsite = [u for u in requests if not u.startswith(base) and not u.startswith("data:")]
            assert not offsite, offsite[:5]                       # charts render with no network

            # Saved with its outputs and widgets on the page, the notebook stays as committed (ui/clean_save.py).
            notebook = REPO / "notebooks" / "explore.ipynb"
            written = notebook.stat().st_mtime_ns
            page.get_by_role("menuitem", name="File", exact=True).click()
            page.get_by_text("Save Notebook", exact=True).click()
            expect(page.locator(".lm-TabBar-tab.jp-mod-dirty")).to_have_count(0)
            for _ in range(100):                                  # the save's write, after the tab's mark went
                if notebook.stat().st_mtime_ns != written:
                    break
                time.sleep(0.1)
            assert notebook.stat().st_mtime_ns != written, "the save wrote nothing"
        finally:
            browser.close()
            after = (REPO / "notebooks" / "explore.ipynb").read_bytes()
            if after != before:
                (REPO / "notebooks" / "explore.ipynb").write_bytes(before)
                diff = difflib.unified_diff(before.decode().splitlines(), after.decode().splitlines(), lineterm="")
                pytest.fail("saving from JupyterLab changed notebooks/explore.ipynb (restored; is "
                            "`python -m hetsched.ui.clean_save` installed?):\n" + "\n".join(list(diff)[:40]))
    exported = pd.read_parquet(REPO / "outputs" / "explore" / "runs.parquet")
    assert exported["run"].nunique() == 4 and len(exported) == 4 * 300
