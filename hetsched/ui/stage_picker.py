"""The explorer's policy picker, by stage: decide, place and round rules chosen separately, validated as they change
(docs/architecture.md#stages). A refused combination shows the registry's message, naming both stages."""

from __future__ import annotations

import ipywidgets as W

from hetsched.errors import HetschedError
from hetsched.ui.names import display_name
from hetsched.core.pipeline import Pipeline
from hetsched.decide.gavel.base import DESCRIPTIONS
from hetsched.decide.synergy.ordering import ORDERINGS
from hetsched.core.registry import DEFAULT_ROUND_S, decide_of, pipeline_for, policy_for, policy_names
from hetsched.core.run_config import SYSTEM_RULES, SimulationConfig
from hetsched.model.throughputs import available_datasets

PLACES = [("GPUs only", ""), ("Proportional CPU/memory (+fair)", "+fair"), ("Greedy CPU/memory (+greedy)", "+greedy"),
          ("Synergy-TUNE (+tune)", "+tune"), ("Synergy-OPT (+opt)", "+opt")]
RULES = [("the decide stage's own", "auto"), ("Gavel (360 s, per micro-task)", "gavel"),
         ("Synergy (300 s, per round, one GPU type)", "synergy"),
         ("Shockwave (120 s, preemption penalty, batch sizes)", "shockwave")]


def _auto_rules(decide: str) -> str:
    kind = decide_of(policy_for(decide, 0)).kind
    return {"allocation": "gavel", "planner": "shockwave", "ordering": "synergy"}[kind]


class PolicyPicker:
    """Decide (every registered allocation, Shockwave's planner, Synergy's orderings), place, rules, round length
    and throughput table; `name`, `rules_name` and `config()` are what a run uses."""

    def __init__(self, default: str = "max_min_fairness_perf"):
        options = [(f"{display_name(n)} ({n})", n) for n in policy_names()]
        options += [(f"{o} (Synergy ordering)", o) for o in ORDERINGS]
        self.policy = W.Dropdown(options=sorted(options), value=default, description="policy",
                                 layout=W.Layout(width="440px"))
        self.place = W.Dropdown(options=PLACES, value="", description="place", layout=W.Layout(width="320px"))
        self.least_free = W.Checkbox(value=False, description="+place (fullest server first)")
        self.rules = W.Dropdown(options=RULES, value="auto", description="rules", layout=W.Layout(width="380px"))
        self.about = W.HTML()
        self.stages = W.HTML()
        self.round_s = W.BoundedFloatText(value=360, min=1, max=86_400, description="round (s)")
        self.throughputs = W.Dropdown(options=available_datasets(), value="gavel_simulation",
                                      description="throughputs")
        self.cluster = None
        self.refused = ""                          # the registry's reason while the combination is refused
        for w in (self.policy, self.place, self.least_free, self.rules):
            w.observe(lambda _: self._changed(), names="value")
        self._changed()
        self.widget = W.VBox([W.HTML("<b>Policy</b>: decide, place, round rules"), W.HBox([self.policy, self.about]),
                              W.HBox([self.place, self.least_free]), W.HBox([self.rules, self.round_s]),
                              self.throughputs, self.stages])

    def controls(self) -> list[W.Widget]:
        return [self.policy, self.place, self.least_free, self.rules, self.round_s, self.throughputs]

    @property
    def name(self) -> str:
        """The composed policy name: decide + placement (an ordering alone is Synergy's greedy)."""
        place = self.place.value
        if self.least_free.value and place:
            place += "+place"
        return self.policy.value + place

    @property
    def rules_name(self) -> str:
        return _auto_rules(self.policy.value) if self.rules.value == "auto" else self.rules.value

    def config(self, **overrides) -> SimulationConfig:
        return SimulationConfig.for_system(self.rules_name, round_s=self.round_s.value, **overrides)

    def pipeline(self, cluster=None, seed: int = 0) -> Pipeline:
        """The run's stages on `cluster`, or `CompositionError` naming the two that conflict."""
        policy = policy_for(self.name, seed, system=self.rules_name)
        return pipeline_for(policy, self.config(seed=seed), cluster)

    def set_cluster(self, cluster) -> None:
        """Validate against this cluster from now on (the explorer calls it when the cluster changes)."""
        self.cluster = cluster
        self._show_stages()

    def _changed(self) -> None:
        try:
            rules = self.rules_name
            kind = decide_of(policy_for(self.policy.value, 0)).kind
            self.round_s.value = SYSTEM_RULES[rules].get("round_s", DEFAULT_ROUND_S[kind])
        except HetschedError:
            pass
        self.about.value = f"<i>{DESCRIPTIONS.get(self.policy.value, '')}</i>"
        self._show_stages()

    def _show_stages(self) -> None:
        try:
            stages = self.pipeline(self.cluster).stages()
            self.stages.value = "<small>" + " &rarr; ".join(f"<b>{k}</b> {v}" for k, v in stages.items()) + \
                "</small>"
            self.refused = ""
        except HetschedError as exc:
            self.refused = str(exc)
            self.stages.value = f"<span style='color:#b00020'>refused: {exc} (Run is off until it runs)</span>"
