"""An explorer for elastic jobs (notebooks/explore.ipynb): Sia, Pollux or Gavel+TJ on one of the paper's workloads
(or its first N jobs) and a cluster of GPU-type node groups. Run works in a background thread (Cancel stops it;
Run is disabled while a run is in progress or the cluster is invalid); every run is a row of the summary and a line
of the JCT chart.
"""

from __future__ import annotations

import altair as alt
import ipywidgets as W
import pandas as pd
from IPython.display import display

from hetsched.errors import HetschedError
from hetsched.ui.background import ERROR as _ERROR
from hetsched.ui.background import BackgroundRuns
from hetsched.ui.names import display_name
from hetsched.ui.plots import cdf_points

class ElasticExplorer(BackgroundRuns):
    def __init__(self, workload: str = "helios-1", jobs: int = 40):
        super().__init__()
        from hetsched.decide.elastic.cluster import NAMED
        from hetsched.decide.elastic.names import ELASTIC_POLICIES
        from hetsched.decide.elastic.workloads import workload_names

        self.policy = W.Dropdown(options=[(display_name(p), p) for p in ELASTIC_POLICIES], value="sia",
                                 description="policy")
        self.workload = W.Dropdown(options=workload_names(), value=workload, description="workload")
        self.jobs = W.BoundedIntText(value=jobs, min=1, max=100_000, description="first jobs")
        self.cluster = W.Combobox(value="sia_hetero", options=list(NAMED), description="cluster",
                                  placeholder="6x4@t4+3x8@rtx+2x8@a100")
        self.seed = W.IntText(value=0, description="seed", disabled=True)
        self.run_button = W.Button(description="Run", button_style="primary", icon="play")
        self.cancel_button = W.Button(description="Cancel", icon="stop", disabled=True)
        self.reset_button = W.Button(description="Reset", icon="trash")
        self.progress = W.FloatProgress(value=0, min=0, max=1, description="progress")
        self.status = W.HTML("Ready.")
        self.summary = W.HTML()
        self.plots = W.Output()
        self.rows: list[dict] = []
        self.results: list[tuple[str, pd.DataFrame]] = []
        self.run_button.on_click(lambda _: self.start())
        self.cancel_button.on_click(lambda _: self.cancel())
        self.reset_button.on_click(lambda _: self.reset())
        for w in (self.policy, self.cluster):
            w.observe(lambda _: self._changed(), names="value")
        self.widget = W.VBox([W.HBox([self.policy, self.workload]), W.HBox([self.cluster, self.jobs, self.seed]),
                              W.HBox([self.run_button, self.cancel_button, self.reset_button]),
                              self.progress, self.status, self.summary, self.plots])
        self._changed()

    def _ipython_display_(self):
        display(self.widget)

    def cluster_spec(self):
        from hetsched.decide.elastic.apps import load_applications
        from hetsched.decide.elastic.cluster import ElasticCluster

        return ElasticCluster.parse(self.cluster.value, {t for a in load_applications().values() for t in a.types})

    def _changed(self) -> None:
        """The seed is Pollux's alone; an invalid cluster disables Run and says why."""
        self.seed.disabled = self.policy.value != "pollux"
        try:
            self.cluster_spec()
            problem = ""
        except HetschedError as exc:
            problem = str(exc)
        self.run_button.disabled = self.running() or bool(problem)
        if problem:
            self.status.value = _ERROR.format(problem)
        elif not self.running():
            self.status.value = "Ready."

    def start(self):
        if self.running():
            self.status.value = "A run is already in progress: Run starts nothing until it ends (Cancel stops it)."
            return None
        from hetsched.sim.elastic import prepare, simulate_elastic
        from hetsched.decide.elastic.workloads import load_workload

        try:
            spec = self.cluster_spec()
            options = {"seed": self.seed.value} if self.policy.value == "pollux" else {}
            frame = load_workload(self.workload.value).sort_values("submit_s", kind="stable").head(self.jobs.value)
            policy, jobs, round_s = prepare(self.policy.value, spec, frame, **options)
        except HetschedError as exc:
            self.status.value = _ERROR.format(exc)
            return None
        label = (f"{len(self.rows) + 1}: {display_name(self.policy.value)} · {self.workload.value} "
                 f"(first {len(jobs)} jobs) · {spec}" + (f" · seed {self.seed.value}" if options else ""))

        def progress(now, done, total):
            self.check_cancel()
            self.progress.value = done / max(total, 1)

        def body():
            result = simulate_elastic(jobs, spec, policy, round_s, progress)
            self.progress.value = 1.0
            self.rows.append({"run": label, **{k: round(v, 3) for k, v in result.metrics().items()}})
            self.results.append((label, result.jobs))
            self.summary.value = pd.DataFrame(self.rows).to_html(index=False)
            self.plots.outputs = ()                     # from a thread: set outputs, not `with self.plots:`
            self.plots.append_display_data(jct_chart(self.results))

        self.run_button.disabled = True
        return self.launch(label, body, self._changed_after_run)

    def _changed_after_run(self) -> None:
        message = self.status.value
        self._changed()
        if "color:#b00020" not in self.status.value:
            self.status.value = message                 # "Done: ..." stays; a cluster error would replace it

    def reset(self) -> None:
        self.stop(timeout=60)
        self.rows, self.results = [], []
        self.summary.value, self.progress.value = "", 0.0
        self.plots.outputs = ()
        self.status.value = "Reset: no runs."


def jct_chart(results: list[tuple[str, pd.DataFrame]]) -> alt.Chart:
    """The JCT distribution (hours) of every run, one line each."""
    frames = []
    for label, jobs in results:
        xs, ys = cdf_points(jobs["jct_s"].to_numpy() / 3600)
        frames.append(pd.DataFrame({"JCT (h)": xs, "fraction of jobs": ys, "run": label}))
    data = pd.concat(frames, ignore_index=True)
    return alt.Chart(data, title="JCT distribution per run").mark_line(interpolate="step-after").encode(
        x=alt.X("JCT (h):Q", scale=alt.Scale(type="log")), y="fraction of jobs:Q",
        color=alt.Color("run:N", legend=alt.Legend(orient="bottom", columns=1, labelLimit=0))).properties(width=520)
