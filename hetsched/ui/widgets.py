"""ipywidgets to explore a cluster and a policy without writing code (notebooks/explore.ipynb).

`Explorer` combines a cluster-spec builder, a workload picker and a policy picker. Run simulates in a
background thread (the kernel stays responsive; Cancel stops it) and draws a JCT CDF, utilization over time and
busy GPUs per type, each with its own legend; earlier runs can be overlaid, Reset clears them, Export writes
the runs (Parquet and CSV) and the chart. "Step one round" follows the current settings: changing any of them
starts the stepping over.
"""

from __future__ import annotations

from pathlib import Path

import altair as alt
import ipywidgets as W
import numpy as np
import pandas as pd
from IPython.display import display

from hetsched.model.cluster import GAVEL_GCP_PRICES, ClusterSpec, Server
from hetsched.errors import HetschedError
from hetsched.sim.metrics import summary
from hetsched.ui.background import ERROR as _ERROR
from hetsched.ui.background import BackgroundRuns
from hetsched.ui.names import display_name
from hetsched.ui.plots import cdf_points, save_figure
from hetsched.core.registry import policy_for
from hetsched.sim.result import Result
from hetsched.sim.simulator import RoundSimulation, simulate
from hetsched.ui.stage_picker import PolicyPicker
from hetsched.model.throughputs import load_throughputs
from hetsched.traces import GavelGenerator
from hetsched.traces.generators.synergy import SynergyGenerator
from hetsched.traces.formats import FORMATS

TIME_BINS = 300                 # points per run in the time-series charts (aggregated, whatever the run length)


class ClusterBuilder:
    """GPU types with counts, servers (GPUs/CPU cores/DRAM per server) and $/h; validated on every change."""

    def __init__(self, counts: dict[str, int] | None = None):
        counts = counts or {"v100": 8, "p100": 8, "k80": 8}
        self.rows = {}
        self.errors = W.HTML()
        self.widget = W.VBox()
        self.listeners: list = []                  # called with the validated spec (or None) on every change
        self.offer(counts)

    def offer(self, counts: dict[str, int]) -> None:
        """Rows for GPU types not shown yet (a loaded throughput table's types, with count 0)."""
        for gpu, n in counts.items():
            if gpu in self.rows:
                continue
            self.rows[gpu] = dict(
                count=W.BoundedIntText(value=n, min=0, max=100_000, description=gpu, layout=W.Layout(width="150px")),
                per_server=W.BoundedIntText(value=1, min=1, max=64, description="GPUs/srv",
                                            layout=W.Layout(width="150px")),
                cpus=W.BoundedIntText(value=0, min=0, max=1024, description="CPUs/srv", layout=W.Layout(width="150px")),
                dram=W.BoundedFloatText(value=0, min=0, max=1e5, description="GB/srv", layout=W.Layout(width="150px")),
                price=W.BoundedFloatText(value=GAVEL_GCP_PRICES.get(gpu, 0.0), min=0, max=1e3, step=0.01,
                                         description="$/h", layout=W.Layout(width="150px")))
            for w in self.rows[gpu].values():
                w.observe(lambda _: self._changed(), names="value")
        self.widget.children = ([W.HTML("<b>Cluster</b>")] + [W.HBox(list(r.values())) for r in self.rows.values()]
                                + [self.errors])

    def _changed(self) -> None:
        spec = self.validate()
        for listener in self.listeners:
            listener(spec)

    def describe(self, spec: ClusterSpec) -> str:
        """The cluster in a run's label: GPUs per type, and the server shape where CPU cores and memory are set."""
        shapes = [f"{g}: {r['per_server'].value} GPUs/{r['cpus'].value} CPUs/{r['dram'].value:g} GB a server"
                  for g, r in self.rows.items() if r["count"].value and (r["cpus"].value or r["dram"].value)]
        return f"{spec}" + (f" ({'; '.join(shapes)})" if shapes else "")

    def controls(self) -> list[W.Widget]:
        return [w for r in self.rows.values() for w in r.values()]

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
    """Generator family (Gavel's job types, or Synergy's models), rate or number of jobs, seed, multi-GPU, or an
    uploaded trace file."""

    def __init__(self):
        self.family = W.Dropdown(options=["gavel", "synergy"], value="gavel", description="generator")
        self.mode = W.ToggleButtons(options=["continuous", "static"], value="continuous")
        self.rate = W.BoundedFloatText(value=2.0, min=0.01, max=1000, description="jobs/hour")
        self.num_jobs = W.BoundedIntText(value=60, min=1, max=100_000, description="jobs")
        self.seed = W.IntText(value=0, description="seed")
        self.multi_gpu = W.Checkbox(value=False, description="multi-GPU jobs")
        self.upload = W.FileUpload(accept=".trace,.csv", multiple=False, description="trace file")
        self.widget = W.VBox([W.HTML("<b>Workload</b>"), W.HBox([self.family, self.mode]),
                              W.HBox([self.rate, self.num_jobs, self.seed]), W.HBox([self.multi_gpu, self.upload])])

    def controls(self) -> list[W.Widget]:
        return [self.family, self.mode, self.rate, self.num_jobs, self.seed, self.multi_gpu, self.upload]

    def describe(self) -> str:
        """The workload in a run's label: trace name, or rate/jobs, seed."""
        if self.upload.value:
            return f"trace {self.upload.value[0]['name']}"
        load = "static" if self.mode.value == "static" else f"{self.rate.value:g} jobs/h"
        return f"{load} · {self.num_jobs.value} jobs · seed {self.seed.value}"

    def jobs(self, table):
        if self.upload.value:
            item = self.upload.value[0]
            name, data = item["name"], bytes(item["content"])
            fmt = "gavel" if name.endswith(".trace") else "csv"
            return FORMATS[fmt].parse(data, source=name)
        static = self.mode.value == "static"
        if self.family.value == "synergy":        # Synergy's models: its orderings under Synergy's rules
            if static:
                raise HetschedError("the synergy generator makes a continuous stream; pick 'continuous'")
            gen = SynergyGenerator(seed=self.seed.value, jobs_per_hour=self.rate.value, multi_gpu=self.multi_gpu.value)
            return gen.jobs(self.num_jobs.value)
        gen = GavelGenerator(seed=self.seed.value, static=static, multi_gpu=self.multi_gpu.value,
                             mean_interarrival_s=0.0 if static else 3600.0 / self.rate.value, throughputs=table)
        return gen.jobs(self.num_jobs.value)


def _binned(times_h: np.ndarray, values: np.ndarray, end_h: float) -> tuple[np.ndarray, np.ndarray]:
    """Mean of `values` in at most TIME_BINS equal time bins: the chart's size does not grow with the run."""
    edges = np.linspace(0.0, max(end_h, 1e-9), TIME_BINS + 1)
    idx = np.clip(np.searchsorted(edges, times_h, side="right") - 1, 0, TIME_BINS - 1)
    sums, counts = np.bincount(idx, values, TIME_BINS), np.bincount(idx, minlength=TIME_BINS)
    keep = counts > 0
    return edges[:-1][keep], sums[keep] / counts[keep]


def _busy(result: Result) -> pd.DataFrame:
    """Busy GPUs per round and GPU type (a co-located pair counted once)."""
    tl = result.timeline_frame()
    held = tl[tl["partner_id"] < tl["job_id"]]
    return held.groupby(["round", "gpu_type"]).agg(t=("start_s", "first"), gpus=("num_gpus", "sum")).reset_index()


def charts(runs: list[tuple[str, Result]]) -> alt.VConcatChart:
    """JCT CDF and utilization over time of every run, busy GPUs per type of the last; each with its legend."""
    cdfs, util = [], []
    for label, r in runs:
        jct, probs = cdf_points(np.array([rec.jct_s / 3600 for rec in r.jobs.values()
                                          if np.isfinite(rec.finish_time_s)], dtype=float))
        cdfs.append(pd.DataFrame({"jct_h": jct, "cdf": probs, "run": label}))
        busy = _busy(r).groupby("round").agg(t=("t", "first"), gpus=("gpus", "sum"))
        hours, used = _binned(busy["t"].to_numpy() / 3600, busy["gpus"].to_numpy() / r.num_gpus,
                              float(busy["t"].max() / 3600) if len(busy) else 0.0)
        util.append(pd.DataFrame({"hours": hours, "utilization": used, "run": label}))
    labels = [label for label, _ in runs]
    legend = alt.Legend(labelLimit=0, orient="bottom", direction="vertical", title="run")
    run_color = alt.Color("run:N", sort=labels, scale=alt.Scale(domain=labels), legend=legend)
    tips = ["run:N"]
    size = dict(width=340, height=200)
    cdf = alt.Chart(pd.concat(cdfs), title="JCT CDF").mark_line(interpolate="step-after").encode(
        x=alt.X("jct_h:Q", title="JCT (hours)"), y=alt.Y("cdf:Q", title="fraction of jobs"), color=run_color,
        tooltip=tips + [alt.Tooltip("jct_h:Q", format=",.2f")]).properties(**size).add_params(
        alt.selection_interval(bind="scales", name="zoom_cdf"))
    use = alt.Chart(pd.concat(util), title="Utilization over time").mark_line().encode(
        x=alt.X("hours:Q"), y=alt.Y("utilization:Q", scale=alt.Scale(domain=[0, 1])), color=run_color,
        tooltip=tips + [alt.Tooltip("utilization:Q", format=".2f")]).properties(**size).add_params(
        alt.selection_interval(bind="scales", name="zoom_use", encodings=["x"]))
    last_label, last = runs[-1]
    wide = _busy(last).astype({"gpus": float}).pivot_table(index="t", columns="gpu_type", values="gpus",
                                                           aggfunc="sum", fill_value=0.0)
    per_type = []                                 # one time grid for every type, so the areas stack
    for gpu in wide.columns:
        hours, gpus = _binned(wide.index.to_numpy() / 3600, wide[gpu].to_numpy(), float(wide.index.max() / 3600))
        per_type.append(pd.DataFrame({"hours": hours, "gpus": gpus, "gpu_type": gpu}))
    types = alt.Chart(pd.concat(per_type) if per_type else pd.DataFrame(columns=["hours", "gpus", "gpu_type"]),
                      title=f"Busy GPUs per type: run {last_label.split(':')[0]}").mark_area(opacity=0.8).encode(
        x="hours:Q", y=alt.Y("gpus:Q", stack=True, title="busy GPUs"),
        color=alt.Color("gpu_type:N", legend=alt.Legend(orient="bottom", title="GPU type")),
        tooltip=["gpu_type:N", alt.Tooltip("gpus:Q", format=".1f")]).properties(**size)
    return alt.vconcat(alt.hconcat(cdf, use).resolve_scale(color="shared"), types).resolve_scale(
        color="independent")


def _readable(ids) -> str:
    """Job ids of a placement: `12`, or `12 + 14` for a co-located pair (never a raw tuple)."""
    return " + ".join(str(int(i)) for i in ids)


class Explorer(BackgroundRuns):
    """The whole explorer: pickers, Run (background) / Cancel / Reset, overlay, export, step-one-round mode."""

    def __init__(self, cluster: dict[str, int] | None = None, export_dir: str | Path = "../outputs/explore"):
        self.cluster = ClusterBuilder(cluster)
        self.workload = WorkloadPicker()
        self.policy = PolicyPicker()
        self.export_dir = Path(export_dir)
        self.run_button = W.Button(description="Run", button_style="primary", icon="play")
        self.cancel_button = W.Button(description="Cancel", icon="stop", disabled=True)
        self.reset_button = W.Button(description="Reset", icon="trash")
        self.export_button = W.Button(description="Export", icon="download")
        self.step_button = W.Button(description="Step one round", icon="step-forward")
        self.overlay = W.Checkbox(value=True, description="overlay previous runs")
        self.progress = W.FloatProgress(value=0, min=0, max=1, description="progress")
        self.status = W.HTML("Ready.")
        self.summary = W.HTML()
        self.plots = W.Output()
        self.plots.add_class("hetsched-charts")
        self.round_view = W.Output()
        self.runs: list[tuple[str, Result]] = []
        self.rows: list[dict] = []                 # per run: label, generator, rules, and its summary numbers
        self._pressed_while_running = False
        super().__init__()
        self._stepper: RoundSimulation | None = None
        self.run_button.on_click(lambda _: self.start())
        self.cancel_button.on_click(lambda _: self.cancel())
        self.reset_button.on_click(lambda _: self.reset())
        self.export_button.on_click(lambda _: self.export())
        self.step_button.on_click(lambda _: self.step())
        for w in self.workload.controls() + self.policy.controls():
            w.observe(lambda _: self._settings_changed(), names="value")
        self.policy.throughputs.observe(lambda c: self.cluster.offer(
            dict.fromkeys(load_throughputs(c["new"]).gpu_types, 0)), names="value")
        self.cluster.listeners.append(lambda spec: (self.policy.set_cluster(spec), self._settings_changed()))
        self.widget = W.VBox([self.cluster.widget, self.workload.widget, self.policy.widget,
                              W.HBox([self.run_button, self.cancel_button, self.reset_button, self.export_button,
                                      self.step_button, self.overlay]),
                              self.progress, self.status, self.summary, self.plots, self.round_view])
        self.cluster.offer(dict.fromkeys(load_throughputs(self.policy.throughputs.value).gpu_types, 0))
        self.policy.set_cluster(self.cluster.validate())
        self._settings_changed()

    def _ipython_display_(self):
        display(self.widget)

    def _inputs(self):
        spec = self.cluster.validate()
        if spec is None:
            raise HetschedError("fix the cluster spec first")
        table = load_throughputs(self.policy.throughputs.value)
        return spec, table, self.workload.jobs(table)

    def _settings_changed(self) -> None:
        """A stepping simulation always belongs to the current settings: any change starts it over. Run is
        disabled while a run is in progress or the combination is refused (the picker says why)."""
        self.run_button.disabled = self.running() or bool(self.policy.refused)
        if self._stepper is not None:
            self._stepper = None
            self.round_view.clear_output()
            self.status.value = "Settings changed: stepping starts over."

    def start(self):
        """Simulate in a background thread; the summary and the charts change together when it finishes."""
        if self.running():
            self._pressed_while_running = True
            self.status.value = "A run is already in progress: Run starts nothing until it ends (Cancel stops it)."
            return None
        try:
            spec, table, jobs = self._inputs()
        except HetschedError as exc:
            self.status.value = _ERROR.format(exc)
            return None
        total = max(len(jobs), 1)
        name, seed, rules = self.policy.name, self.workload.seed.value, self.policy.rules_name
        generator = "trace" if self.workload.upload.value else self.workload.family.value
        label = (f"{len(self.runs) + 1 if self.overlay.value else 1}: {display_name(name)} · "
                 f"{'' if generator == 'trace' else generator + ' '}{self.workload.describe()} · rules {rules} · "
                 f"{self.cluster.describe(spec)}")
        self._pressed_while_running = False

        def progress(now, finished):
            self.check_cancel()
            self.progress.value = finished / total

        def body():
            policy = policy_for(name, seed, system=rules)
            result = simulate(jobs, spec, policy, table, self.policy.config(seed=seed), on_progress=progress)
            self.progress.value = 1.0
            runs = (self.runs if self.overlay.value else []) + [(label, result)]
            row = summary(result)
            chart = charts(runs)
            self.plots.outputs = ()                 # from a thread: set outputs, not `with self.plots:`
            self.plots.append_display_data(chart)
            self.runs = runs
            self.rows = (self.rows if self.overlay.value else []) + [{
                "run": label, "generator": generator, "rules": rules, "average JCT (h)": row["avg_jct_s"] / 3600,
                "makespan (h)": row["makespan_s"] / 3600, "utilization": row["utilization"],
                "jobs": row["num_jobs"]}]
            self.summary.value = pd.DataFrame(self.rows).drop(columns=["generator", "rules"]).to_html(
                index=False, float_format=lambda v: f"{v:.2f}")
            return (" Run was pressed during it and started nothing: press it again."
                    if self._pressed_while_running else "")

        def after():                                    # this run is over
            self.run_button.disabled = bool(self.policy.refused)

        self.run_button.disabled = True
        return self.launch(label, body, after)

    def reset(self) -> None:
        """Forget every run and the stepping simulation."""
        self.stop(timeout=30)
        self.runs, self.rows, self._stepper = [], [], None
        self.summary.value, self.progress.value = "", 0.0
        self.plots.outputs = self.round_view.outputs = ()
        self.status.value = "Reset: no runs."

    def export(self) -> list[Path]:
        """Write every run's jobs (one table, a `run` column) as Parquet and CSV, and the chart as PNG/SVG/HTML."""
        if not self.runs:
            self.status.value = _ERROR.format("nothing to export: run a simulation first")
            return []
        self.export_dir.mkdir(parents=True, exist_ok=True)
        table = pd.concat([r.jobs_frame().assign(run=label, policy=r.policy, generator=meta["generator"],
                                                 rules=meta["rules"])
                           for (label, r), meta in zip(self.runs, self.rows)], ignore_index=True)
        paths = [self.export_dir / "runs.parquet", self.export_dir / "runs.csv"]
        table.to_parquet(paths[0], index=False)
        table.to_csv(paths[1], index=False)
        paths += save_figure(charts(self.runs), self.export_dir, "explore")
        self.status.value = "Exported: " + ", ".join(str(p) for p in paths)
        return paths

    def step(self) -> None:
        """Advance a stepping simulation by one round and show the allocation and the placement."""
        try:
            if self._stepper is None:
                spec, table, jobs = self._inputs()
                seed = self.workload.seed.value
                self._stepper = RoundSimulation(jobs, spec, policy_for(self.policy.name, seed,
                                                                       system=self.policy.rules_name),
                                                table, self.policy.config(seed=seed))
            sim = self._stepper
            more = sim.step()
        except HetschedError as exc:
            self.status.value = _ERROR.format(exc)
            return
        sched = sim.sched
        self.status.value = f"Stepping {display_name(self.policy.name)}: t = {sim.now / 3600:.2f} h."
        self.round_view.clear_output(wait=True)
        with self.round_view:
            print(f"{display_name(self.policy.name)}: t = {sim.now / 3600:.2f} h, {len(sched.jobs)} "
                  f"active jobs" + ("" if more else " (finished)"))
            allocation = sched.allocation
            if allocation is not None and len(allocation.job_ids):
                alloc = pd.DataFrame(allocation.x, columns=sched.gpu_types,
                                     index=[_readable(np.atleast_1d(i)) for i in allocation.job_ids])
                display(alloc.round(3).rename_axis("job"))
            plan = sim.plan
            if plan is not None and plan.assignments:
                shares = any(a.cpus or a.mem_gb for a in plan.assignments)   # a CPU/memory placement's
                display(pd.DataFrame([{"jobs": _readable(a.job_ids), "GPU type": sched.gpu_types[a.gpu_type],
                                       "GPUs": ", ".join(str(g) for g in a.gpus),
                                       "lease extended": "yes" if a.extended else "no",
                                       **({"CPUs/GPU": a.cpus, "GB/GPU": a.mem_gb} if shares else {})}
                                      for a in plan.assignments]))
        if not more:
            self._stepper = None
