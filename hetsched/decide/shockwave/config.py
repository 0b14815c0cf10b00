"""Shockwave's planner hyper-parameters (docs/rules.md#planner-config) and the artifact's configuration files."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path

from hetsched.errors import SpecError

#: Which plan within the gap a priority window keeps (docs/rules.md#planner-fairness).
FAIRNESS = ("solver", "ftf", "share")


@dataclass(frozen=True)
class PlannerConfig:
    """Window, welfare/makespan trade-off and solver limits of the Shockwave planner."""

    future_rounds: int = 20                 # R: rounds planned per solve
    k: float = 1e-3                         # weight of the makespan regulariser (max predicted remaining time)
    lam: float = 12.0                       # priority exponent for jobs behind their fair finish time
    rhomax: float = 1.0
    log_bases: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
    log_origin: float = 1e-6                # ln(1e-6) stands for ln(0)
    momentum: float = 0.9
    reopt_rounds: int = 8                   # forced re-solve every this many rounds
    almost_done_exponent: float = 100.0     # rho^100 for jobs with less than one round of work left
    # Open-source solvers need bounded coefficients: rho^lambda reaches 1e20 and more. Capped jobs still
    # outrank every uncapped one but lose their order among themselves (docs/rules.md#planner-programs).
    priority_cap: float = 1e6
    gap: float = 1e-3
    time_limit_s: float = 15.0
    solver: str = "highs"
    # The MILP solver's random seed. Within the gap the NSW term is a tie-breaker, so seeds return different
    # near-optimal plans and the per-job outcomes (worst rho) move with them; the run's --seed sets it.
    solver_seed: int = 0
    # "aggregate": integer rounds per job (hetsched's); "artifact": x[j, r] and SOS2 binaries, as the artifact
    formulation: str = "aggregate"
    # Mixed GPU types: plan with each job's rate per type (True) or treat every type as the profile's (False).
    heterogeneity_aware: bool = True
    # Finish-time ratios of "times" since the planner's origin (the artifact's) or of "durations" since each job's
    # arrival (Themis's), which do not fade as a stream ages (docs/rules.md#ftf-ratio).
    ftf_ratio: str = "times"
    # Further HiGHS options, (name, value) pairs (JSON: {"solver_options": {name: value}}): to measure how the
    # plans depend on the solver's search (benchmarks/planner_robustness.py). Empty: HiGHS's defaults.
    solver_options: tuple = ()
    # Which of the plans within the gap a priority window keeps (docs/rules.md#planner-fairness): "solver", the one
    # HiGHS stops at (the artifact's), where on several GPU types no plan built without the search is within the gap
    # (whole_window_slack, fair_plan); "ftf", the one whose predicted finish-time ratios exceed rhomax least;
    # "share", the one whose worst-off job has the largest share of the window's rounds; both from lexicographic
    # stages solved to optimality (one plan, whatever the solver's path; the run warns of a stage its time limit
    # stopped).
    fairness: str = "solver"
    # Several GPU types, fairness "solver": a window may be planned without the solver, each job on one type for the
    # whole window, when that plan is within the gap of the program's bound and runs every job in every round at
    # least (1 - whole_window_slack) x its fastest rate (docs/rules.md#whole-window-plan); 0: only at the bound.
    whole_window_slack: float = 0.1
    # Several GPU types, fairness "solver": a window the whole-window plan does not take is planned without the
    # solver's search where the fair plan is within the gap of the program's LP bound (docs/rules.md#fair-plan);
    # False: HiGHS plans it, and the plan depends on where its search stops (the planner before 2026-11-30).
    fair_plan: bool = True

    def __post_init__(self) -> None:
        if not (isinstance(self.future_rounds, int) and self.future_rounds >= 1):
            raise SpecError(f"planner: future_rounds must be a positive integer, got {self.future_rounds!r}")
        for name in ("k", "lam", "rhomax", "priority_cap", "time_limit_s"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise SpecError(f"planner: {name} must be a finite number >= 0, got {value!r}")
        bases = self.log_bases
        if len(bases) < 2 or bases[0] != 0.0 or bases[-1] != 1.0 or any(b <= a for a, b in zip(bases, bases[1:])):
            raise SpecError(f"planner: log_approximation_bases must rise from 0 to 1, got {list(bases)}")
        if self.formulation not in ("aggregate", "artifact"):
            raise SpecError(f"planner: formulation must be aggregate or artifact, got {self.formulation!r}")
        if not (isinstance(self.solver_seed, int) and 0 <= self.solver_seed < 2**31):
            raise SpecError(f"planner: solver_seed must be an integer in [0, 2^31), got {self.solver_seed!r}")
        if self.ftf_ratio not in ("times", "durations"):
            raise SpecError(f"planner: ftf_ratio must be times or durations, got {self.ftf_ratio!r}")
        if self.fairness not in FAIRNESS:
            raise SpecError(f"planner: fairness must be one of {', '.join(FAIRNESS)}, got {self.fairness!r}")
        if self.fairness != "solver" and self.formulation != "aggregate":
            raise SpecError(f"planner: fairness {self.fairness} needs the aggregate formulation (the artifact's has "
                            "no second stage)")
        slack = self.whole_window_slack
        if not (isinstance(slack, (int, float)) and not isinstance(slack, bool) and 0 <= slack <= 1):
            raise SpecError(f"planner: whole_window_slack must be a number in [0, 1], got {slack!r}")
        if self.fairness != "solver" and slack != PlannerConfig.whole_window_slack:
            raise SpecError(f"planner: whole_window_slack applies to fairness solver only; fairness {self.fairness} "
                            "solves every window for its one plan")
        if not isinstance(self.fair_plan, bool):
            raise SpecError(f"planner: fair_plan must be true or false, got {self.fair_plan!r}")
        if self.fairness != "solver" and not self.fair_plan:
            raise SpecError(f"planner: fair_plan applies to fairness solver only; fairness {self.fairness} solves "
                            "every window for its one plan")
        if self.solver not in ("highs", "scip"):
            raise SpecError(f"planner: solver must be highs or scip, got {self.solver!r}")
        if self.solver_options and self.solver != "highs":
            raise SpecError("planner: solver_options are HiGHS options; this planner solves with "
                            f"{self.solver!r}")
        if not all(isinstance(o, tuple) and len(o) == 2 and isinstance(o[0], str)
                   and isinstance(o[1], (bool, int, float, str)) for o in self.solver_options):
            raise SpecError(f"planner: solver_options are (name, value) pairs of HiGHS options, got "
                            f"{self.solver_options!r}")
        if self.solver_options:                 # a wrong name or value stops the run now, not at its first solve
            from hetsched.decide.shockwave.solve import set_options
            from hetsched.solvers import new_highs

            set_options(new_highs(), self.solver_options)


#: The artifact's JSON keys -> PlannerConfig fields (gpu_ram and solver_num_threads are accepted and unused), and
#: hetsched's own `ftf_ratio`, `solver_options`, `fairness`, `whole_window_slack` and `fair_plan`.
_JSON_KEYS = {"future_rounds": "future_rounds", "k": "k", "lambda": "lam", "rhomax": "rhomax",
              "log_approximation_bases": "log_bases", "solver_rel_gap": "gap", "solver_timeout": "time_limit_s",
              "ftf_ratio": "ftf_ratio", "solver_options": "solver_options", "fairness": "fairness",
              "whole_window_slack": "whole_window_slack", "fair_plan": "fair_plan"}
_IGNORED = {"gpu_ram", "solver_num_threads", "solver_preference", "gram", "n_epoch_vars_max"}

#: The artifact's five configurations (configurations/*.json in uw-mad-dash/shockwave @ 8a44f4a).
PRESETS: dict[str, PlannerConfig] = {
    "tacc_32gpus": PlannerConfig(k=1e-3, lam=12.0),
    "scale_64gpus": PlannerConfig(k=10.0, lam=5.0),
    "scale_128gpus": PlannerConfig(k=1e-3, lam=15.0),
    "scale_256gpus": PlannerConfig(k=1e5, lam=5.0),
    "shockwave_example_config": PlannerConfig(k=10.0, lam=5.0),
}


def load_planner_config(source: str | Path | dict | None = None, **overrides) -> PlannerConfig:
    """A preset name, a path to an artifact-style JSON file, a dict in that layout, or None (canonical)."""
    if source is None:
        return replace(PRESETS["tacc_32gpus"], **overrides)
    if isinstance(source, str) and Path(source).stem in PRESETS and not Path(source).exists():
        return replace(PRESETS[Path(source).stem], **overrides)
    where = "<dict>"
    if not isinstance(source, dict):
        where = str(source)
        try:
            source = json.loads(Path(source).read_text())
        except OSError as exc:
            raise SpecError(f"{where}: cannot read the Shockwave configuration ({exc.strerror}); presets: "
                            f"{', '.join(PRESETS)}") from None
        except ValueError as exc:
            raise SpecError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(source, dict):
        raise SpecError(f"{where}: a Shockwave configuration is a JSON object")
    unknown = set(source) - set(_JSON_KEYS) - _IGNORED
    if unknown:
        raise SpecError(f"{where}: unknown key(s) {sorted(unknown)}; allowed: {sorted(set(_JSON_KEYS) | _IGNORED)}")
    values = {}
    for key, name in _JSON_KEYS.items():
        if key in source:
            value = source[key]
            if name == "log_bases":
                if not isinstance(value, list) or not all(isinstance(v, (int, float)) for v in value):
                    raise SpecError(f"{where}: {key} must be a list of numbers")
                value = tuple(float(v) for v in value)
            elif name == "future_rounds":
                if not isinstance(value, int) or isinstance(value, bool):
                    raise SpecError(f"{where}: {key} must be an integer, got {value!r}")
            elif name == "solver_options":
                if not isinstance(value, dict):
                    raise SpecError(f"{where}: {key} must be an object of HiGHS option names and values")
                value = tuple(sorted(value.items()))
            elif name == "ftf_ratio":
                if value not in ("times", "durations"):
                    raise SpecError(f"{where}: {key} must be \"times\" or \"durations\", got {value!r}")
            elif name == "fairness":
                if value not in FAIRNESS:
                    raise SpecError(f"{where}: {key} must be one of {', '.join(FAIRNESS)}, got {value!r}")
            elif name == "fair_plan":
                if not isinstance(value, bool):
                    raise SpecError(f"{where}: {key} must be true or false, got {value!r}")
            elif not isinstance(value, (int, float)) or isinstance(value, bool):
                raise SpecError(f"{where}: {key} must be a number, got {value!r}")
            values[name] = value
    try:
        return PlannerConfig(**{**values, **overrides})
    except SpecError as exc:
        raise SpecError(f"{where}: {exc}") from None

