"""Shockwave's planner (docs/rules.md#planner): per-job predictor state, the window and rank MILPs, and the
planner core that plugs into the simulator and the runtime as `ShockwavePolicy`."""

from hetsched.decide.shockwave.config import PRESETS, PlannerConfig, load_planner_config

__all__ = ["PRESETS", "PlannerConfig", "load_planner_config"]
