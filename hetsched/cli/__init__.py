"""The `hetsched` command line."""

import argparse


class DefaultsHelp(argparse.ArgumentDefaultsHelpFormatter):
    """argparse's defaults in the help, except where the help already says its default or there is none to say
    (argparse appended "(default: None)" after "(default: the preset's)"). A default of 0 is said: 0 == False."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or "(default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def changed(args: argparse.Namespace, defaults: dict) -> list[str]:
    """The flags among `defaults` (argparse dests -> their parser's defaults) that this command line changed."""
    return [f"--{d.rstrip('_').replace('_', '-')}" for d, default in defaults.items() if getattr(args, d) != default]


def positive_int(text: str) -> int:
    """argparse type of a count: a whole number >= 1 (a negative --num-jobs ended in islice's ValueError, and 0 jobs
    in 'no job finished inside the measured window')."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


LOSSY_HELP = ("write Gavel's, Shockwave's or Synergy's format even where it cannot carry a field the jobs set "
              "(pinned GPU types, adaptation modes, entities, an SLO's duration, ...), which is refused otherwise; "
              ".csv and .parquet keep every field")
