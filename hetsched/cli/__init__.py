"""The `hetsched` command line."""

import argparse


class DefaultsHelp(argparse.ArgumentDefaultsHelpFormatter):
    """argparse's defaults in the help, except where the help already says its default or there is none to say
    (argparse appended "(default: None)" after "(default: the preset's)")."""

    def _get_help_string(self, action):
        if action.default in (None, False) or "(default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)
