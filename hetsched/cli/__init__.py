"""The `hetsched` command line."""

import argparse


class DefaultsHelp(argparse.ArgumentDefaultsHelpFormatter):
    """argparse's defaults in the help, except where the help already says its default or there is none to say
    (argparse appended "(default: None)" after "(default: the preset's)"). A default of 0 is said: 0 == False."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or "(default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)
