"""The papers' experiments as functions: a grid of runs per figure and preset, and its charts.

Notebooks stay thin: they pick a preset, call `configs(...)`, run `hetsched.experiments.sweep.sweep`, then call the
chart and comparison helpers here. Presets: `tiny` (tests, seconds), `quick` (CI and `make reproduce`,
minutes, smaller clusters and windows), `paper` (the artifact's parameters).
"""

PRESETS = ("tiny", "quick", "paper")


def check_preset(preset) -> str:
    """A notebook's `preset` parameter, or a clear error (a misspelt one was a bare KeyError in whichever lookup
    came first)."""
    if preset not in PRESETS:
        from hetsched.errors import HetschedError
        raise HetschedError(f"preset {preset!r}: expected one of {', '.join(PRESETS)}")
    return preset
