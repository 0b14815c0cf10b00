"""Shockwave's dynamic adaptation: batch-size schedules, the planner's oracle profile, the runtime switching
(docs/rules.md#batch-size) and the simulator's hooks for Shockwave's round rules."""

from .profile import EpochProfile, epoch_profile
from .runtime import RuntimeAdaptation, Switch

__all__ = ["EpochProfile", "RuntimeAdaptation", "Switch", "epoch_profile"]
