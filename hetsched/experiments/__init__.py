"""The papers' experiments as functions: a grid of runs per figure and preset, and its charts.

Notebooks stay thin: they pick a preset, call `configs(...)`, run `hetsched.experiments.sweep.sweep`, then call the
chart and comparison helpers here. Presets: `tiny` (tests, seconds), `quick` (CI and `make reproduce`,
minutes, smaller clusters and windows), `paper` (the artifact's parameters).
"""

PRESETS = ("tiny", "quick", "paper")


def choose(table, key, what: str):
    """`table[key]`, or an error that names the choices: a misspelt preset, figure kind or setup was a bare
    KeyError from whichever lookup came first."""
    try:
        return table[key]
    except (KeyError, TypeError):
        from hetsched.errors import HetschedError
        raise HetschedError(f"{what} {key!r}: expected one of {', '.join(map(str, table))}") from None


def check_preset(preset) -> str:
    """A notebook's `preset` parameter, or a clear error before any work."""
    choose(dict.fromkeys(PRESETS), preset, "preset")
    return preset
