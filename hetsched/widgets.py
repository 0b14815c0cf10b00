"""ipywidgets to explore a cluster and a policy without writing code (notebooks/explore.ipynb).

`Explorer` combines a cluster-spec builder, a workload picker and a policy picker. Run simulates in a
background thread (the kernel stays responsive) and draws a JCT CDF, utilization over time and busy GPUs per
type; earlier runs can be overlaid. "Step one round" shows the allocation and where each job runs.
"""

from __future__ import annotations

import threading
import traceback

import altair as alt
import ipywidgets as W
import numpy as np
import pandas as pd
from IPython.display import display

from .cluster import GAVEL_GCP_PRICES, ClusterSpec, Server
from .errors import HetschedError
from .metrics import summary
from .policies import policy_names
from .policies.base import DESCRIPTIONS
from .result import Result
from .simulator import RoundSimulation, simulate
from .throughputs import available_datasets, load_throughputs
from .traces import GavelGenerator
from .traces.formats import FORMATS

_ERROR = "<span style='color:#b00020'>{}</span>"


class ClusterBuilder:
    """GPU types with counts, servers (GPUs/CPU cores/DRAM per server) and $/h; validated on every change."""

    def __init__(self, counts: dict[str, int] | None = None):
        counts = counts or {"v100": 8, "p100": 8, "k80": 8}
        self.rows = {}
        for gpu, n in counts.items():
            self.rows[gpu] = dict(
                count=W.BoundedIntText(value=n, min=0, max=100_000, description=gpu, layout=W.Layout(width="150px")),
                per_server=W.BoundedIntText(value=1, min=1, max=64, description="GPUs/srv",
                                            layout=W.Layout(width="150px")),
                cpus=W.BoundedIntText(value=0, min=0, max=1024, description="CPUs/srv", layout=W.Layout(width="150px")),
                dram=W.BoundedFloatText(value=0, min=0, max=1e5, description="GB/srv", layout=W.Layout(width="150px")),
                price=W.BoundedFloatText(value=GAVEL_GCP_PRICES.get(gpu, 0.0), min=0, max=1e3, step=0.01,
                                         description="$/h", layout=W.Layout(width="150px")))
        self.errors = W.HTML()
        for row in self.rows.values():
            for w in row.values():
                w.observe(lambda _: self.validate(), names="value")
        self.widget = W.VBox([W.HTML("<b>Cluster</b>")] + [W.HBox(list(r.values())) for r in self.rows.values()]
                             + [self.errors])

    def spec(self) -> ClusterSpec:
        servers, types, counts, prices = [], [], [], {}
        for gpu, r in self.rows.items():
            n, per = r["count"].value, r["per_server"].value
            if n == 0:
                continue
            types.append(gpu)
            counts.append(n)
            prices[gpu] = r["price"].value
            full, rest = divmod(n, per)
            cpus, dram = r["cpus"].value or None, r["dram"].value or None
            servers += [Server(gpu, per, cpus, dram)] * full + ([Server(gpu, rest, cpus, dram)] if rest else [])
        if not types:
            raise HetschedError("cluster: give at least one GPU")
        return ClusterSpec(tuple(types), tuple(counts), tuple(servers), prices)

    def validate(self) -> ClusterSpec | None:
        try:
            spec = self.spec()
        except HetschedError as exc:
            self.errors.value = _ERROR.format(exc)
            return None
        self.errors.value = f"<span style='color:#555'>{spec.num_gpus} GPUs: {spec}</span>"
        return spec


class WorkloadPicker:
    """Generator family, rate or number of jobs, seed, multi-GPU, or an uploaded trace file."""

    def __init__(self):
        self.family = W.Dropdown(options=["gavel"], value="gavel", description="generator")
        self.mode = W.ToggleButtons(options=["continuous", "static"], value="continuous")
        self.rate = W.BoundedFloatText(value=2.0, min=0.01, max=1000, description="jobs/hour")
        self.num_jobs = W.BoundedIntText(value=60, min=1, max=100_000, description="jobs")
        self.seed = W.IntText(value=0, description="seed")
        self.multi_gpu = W.Checkbox(value=False, description="multi-GPU jobs")
        self.upload = W.FileUpload(accept=".trace,.csv", multiple=False, description="trace file")
        self.widget = W.VBox([W.HTML("<b>Workload</b>"), W.HBox([self.family, self.mode]),
                              W.HBox([self.rate, self.num_jobs, self.seed]), W.HBox([self.multi_gpu, self.upload])])

    def jobs(self, table):
        if self.upload.value:
            item = self.upload.value[0]
            name, data = item["name"], bytes(item["content"])
            fmt = "gavel" if name.endswith(".trace") else "csv"
            return FORMATS[fmt].parse(data, source=name)
        static = self.mode.value == "static"
        gen = GavelGenerator(seed=self.seed.value, static=static, multi_gpu=self.multi_gpu.value,
                             mean_interarrival_s=0.0 if static else 3600.0 / self.rate.value, throughputs=table)
        return gen.jobs(self.num_jobs.value)


class PolicyPicker:
    """Every registered policy, with its description and the mechanism's round length."""

    def __init__(self, default: str = "max_min_fairness_perf"):
        self.policy = W.Dropdown(options=policy_names(), value=default, description="policy")
        self.about = W.HTML()
        self.round_s = W.BoundedFloatText(value=360, min=1, max=86_400, description="round (s)")
        self.throughputs = W.Dropdown(options=available_datasets(), value="gavel_simulation",
                                      description="throughputs")
        self.policy.observe(lambda _: self._describe(), names="value")
        self._describe()
        self.widget = W.VBox([W.HTML("<b>Policy</b>"), W.HBox([self.policy, self.about]),
                              W.HBox([self.round_s, self.throughputs])])

    def _describe(self):
        from .policies import make_policy
        make_policy(self.policy.value)
        self.about.value = f"<i>{DESCRIPTIONS.get(self.policy.value, '')}</i>"


def _svg(chart: alt.TopLevelMixin) -> str:
    """Static SVG (offline, via vl-convert), so the figure is the same in JupyterLab, VS Code and papermill."""
    import vl_convert as vlc
    return vlc.vegalite_to_svg(chart.to_json())


def charts(runs: list[tuple[str, Result]]) -> alt.TopLevelMixin:
    """JCT CDF, utilization over time, and busy GPUs per type of the last run."""
    cdfs, util = [], []
    for label, r in runs:
        jct = np.sort([rec.jct_s / 3600 for rec in r.jobs.values() if np.isfinite(rec.finish_time_s)])
        cdfs.append(pd.DataFrame({"jct_h": jct, "cdf": np.arange(1, len(jct) + 1) / max(len(jct), 1), "run": label}))
        tl = r.timeline_frame()
        held = tl[tl["partner_id"] < tl["job_id"]]
        busy = held.groupby("round").agg(t=("start_s", "first"), gpus=("num_gpus", "sum")).reset_index()
        util.append(pd.DataFrame({"hours": busy["t"] / 3600, "utilization": busy["gpus"] / r.num_gpus, "run": label}))
    cdf = alt.Chart(pd.concat(cdfs), title="JCT CDF").mark_line(interpolate="step-after").encode(
        x=alt.X("jct_h:Q", title="JCT (hours)"), y=alt.Y("cdf:Q", title="fraction of jobs"), color="run:N")
    use = alt.Chart(pd.concat(util), title="Utilization over time").mark_line().encode(
        x=alt.X("hours:Q"), y=alt.Y("utilization:Q", scale=alt.Scale(domain=[0, 1])), color="run:N")
    last = runs[-1][1].timeline_frame()
    last = last[last["partner_id"] < last["job_id"]]
    per_type = last.groupby(["round", "gpu_type"]).agg(t=("start_s", "first"), gpus=("num_gpus", "sum")).reset_index()
    per_type["hours"] = per_type["t"] / 3600
    timeline = alt.Chart(per_type, title=f"Busy GPUs per type (run {runs[-1][0].split(':')[0]})").mark_area(
        opacity=0.8).encode(
        x="hours:Q", y=alt.Y("gpus:Q", stack=True, title="busy GPUs"), color="gpu_type:N")
    size = dict(width=250, height=200)
    return alt.hconcat(cdf.properties(**size), use.properties(**size), timeline.properties(**size))


class Explorer:
    """The whole explorer: pickers, Run (background), overlay, and step-one-round mode."""

    def __init__(self, cluster: dict[str, int] | None = None):
        self.cluster = ClusterBuilder(cluster)
        self.workload = WorkloadPicker()
        self.policy = PolicyPicker()
        self.run_button = W.Button(description="Run", button_style="primary", icon="play")
        self.step_button = W.Button(description="Step one round", icon="step-forward")
        self.overlay = W.Checkbox(value=True, description="overlay previous runs")
        self.progress = W.FloatProgress(value=0, min=0, max=1, description="progress")
        self.status = W.HTML("Ready.")
        self.summary = W.HTML()
        self.plots = W.HTML()
        self.plots.add_class("hetsched-charts")
        self.round_view = W.Output()
        self.runs: list[tuple[str, Result]] = []
        self._thread: threading.Thread | None = None
        self._stepper: RoundSimulation | None = None
        self.run_button.on_click(lambda _: self.start())
        self.step_button.on_click(lambda _: self.step())
        self.widget = W.VBox([self.cluster.widget, self.workload.widget, self.policy.widget,
                              W.HBox([self.run_button, self.step_button, self.overlay, self.progress]),
                              self.status, self.summary, self.plots, self.round_view])
        self.cluster.validate()

    def _ipython_display_(self):
        display(self.widget)

    def _inputs(self):
        spec = self.cluster.validate()
        if spec is None:
            raise HetschedError("fix the cluster spec first")
        table = load_throughputs(self.policy.throughputs.value)
        return spec, table, self.workload.jobs(table)

    def start(self) -> threading.Thread | None:
        """Simulate in a background thread; the charts appear when it finishes."""
        if self._thread is not None and self._thread.is_alive():
            self.status.value = "A run is already in progress."
            return None
        try:
            spec, table, jobs = self._inputs()
        except HetschedError as exc:
            self.status.value = _ERROR.format(exc)
            return None
        total = max(len(jobs), 1)
        policy = self.policy.policy.value

        def progress(now, finished):
            self.progress.value = finished / total

        def work():
            try:
                self.status.value = f"Running {policy} on {spec} ({len(jobs)} jobs)..."
                result = simulate(jobs, spec, policy, table, round_s=self.policy.round_s.value,
                                  on_progress=progress)
                self.progress.value = 1.0
                label = f"{len(self.runs) + 1}: {policy} on {spec}"
                self.runs = (self.runs if self.overlay.value else []) + [(label, result)]
                row = summary(result)
                self.summary.value = (f"<b>{label}</b>: average JCT {row['avg_jct_s'] / 3600:.2f} h, makespan "
                                      f"{row['makespan_s'] / 3600:.1f} h, utilization {row['utilization']:.2f}, "
                                      f"{row['num_jobs']} jobs")
                self.plots.value = _svg(charts(self.runs))
                self.status.value = "Done."
            except Exception as exc:  # show the error in the UI instead of losing it in a thread
                self.status.value = _ERROR.format(f"{type(exc).__name__}: {exc}")
                traceback.print_exc()

        self._thread = threading.Thread(target=work, daemon=True)
        self._thread.start()
        return self._thread

    def step(self) -> None:
        """Advance a stepping simulation by one round and show the allocation and the placement."""
        try:
            if self._stepper is None:
                spec, table, jobs = self._inputs()
                self._stepper = RoundSimulation(jobs, spec, self.policy.policy.value, table,
                                                round_s=self.policy.round_s.value)
            sim = self._stepper
            more = sim.step()
        except HetschedError as exc:
            self.status.value = _ERROR.format(exc)
            return
        sched = sim.sched
        self.round_view.clear_output(wait=True)
        with self.round_view:
            print(f"t = {sim.now / 3600:.2f} h, {len(sched.jobs)} active jobs" + ("" if more else " (finished)"))
            if sched.allocation is not None and len(sched.allocation.job_ids):
                alloc = pd.DataFrame(sched.allocation.x, index=sched.allocation.job_ids, columns=sched.gpu_types)
                display(alloc.round(3).rename_axis("job"))
            plan = sim.plan
            if plan is not None and plan.assignments:
                display(pd.DataFrame([{"jobs": a.job_ids, "gpu type": sched.gpu_types[a.gpu_type], "gpus": a.gpus,
                                       "lease extended": a.extended} for a in plan.assignments]))
        if not more:
            self._stepper = None
