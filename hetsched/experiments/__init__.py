"""The papers' experiments as functions: a grid of runs per figure and preset, and its charts.

Notebooks stay thin: they pick a preset, call `configs(...)`, run `hetsched.experiments.sweep.sweep`, then call the
chart and comparison helpers here. Presets: `tiny` (tests, seconds), `quick` (CI and `make reproduce`,
minutes, smaller clusters and windows), `paper` (the artifact's parameters).
"""

PRESETS = ("tiny", "quick", "paper")
