"""``--help`` that shows each option's default, for every command line of the project."""

from __future__ import annotations

import argparse


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Appends ``(default: X)`` to an option's help when it has a real default the help does not name."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (default in (None, False, argparse.SUPPRESS) or "default" in text or not action.option_strings
                or isinstance(action, argparse._VersionAction | argparse._HelpAction)):
            return action.help
        return f"{text} (default: %(default)s)".strip()


def use_defaults_help(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Give ``parser`` and every subcommand's parser :class:`DefaultsHelpFormatter`."""
    parser.formatter_class = DefaultsHelpFormatter
    for sub in subcommands(parser).values():
        use_defaults_help(sub)
    return parser


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parser's subcommands by name, in the order they were added."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}
