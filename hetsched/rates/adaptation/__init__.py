"""Shockwave's dynamic adaptation: batch-size schedules, the planner's oracle profile, the runtime switching
(docs/rules.md#batch-size) and the simulator's hooks for Shockwave's round rules."""

from hetsched.rates.adaptation.profile import EpochProfile, epoch_profile
from hetsched.rates.adaptation.runtime import RuntimeAdaptation, Switch

__all__ = ["EpochProfile", "RuntimeAdaptation", "Switch", "epoch_profile"]
