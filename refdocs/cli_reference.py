"""docs/reference/cli.md from the argparse parsers of ``jobmirror``, ``kubectl jobmirror`` and ``jobmirror-builtin``."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from kruntime.helpformat import DefaultsHelpFormatter, subcommands


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _flags(action: argparse.Action) -> str:
    names = ", ".join(f"`{o}`" for o in action.option_strings) or f"`{action.dest}`"
    if action.option_strings and action.nargs != 0:
        names += f" {action.metavar or action.dest.upper()}"
    return names


def _default(action: argparse.Action) -> str:
    if action.required:
        return "required"
    if action.default in (None, False, argparse.SUPPRESS) or not action.option_strings:
        return "—"
    return f"`{action.default}`"


def _help(action: argparse.Action) -> str:
    text = (action.help or "") % {"default": action.default} if action.help else ""
    if action.choices and not isinstance(action, argparse._SubParsersAction):
        text += ("; " if text else "") + "one of " + ", ".join(f"`{c}`" for c in action.choices)
    return _cell(text) or "—"


def _table(parser: argparse.ArgumentParser) -> Iterator[str]:
    rows = [a for a in parser._actions
            if not isinstance(a, argparse._HelpAction | argparse._VersionAction | argparse._SubParsersAction)]
    if not rows:
        return
    yield "| option | default | description |\n|---|---|---|"
    for a in rows:
        yield f"| {_flags(a)} | {_default(a)} | {_help(a)} |"


def _usage(parser: argparse.ArgumentParser) -> str:
    fmt = DefaultsHelpFormatter(parser.prog, width=100)
    fmt.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")
    return fmt.format_help().strip()


def command_section(parser: argparse.ArgumentParser, level: int = 2) -> Iterator[str]:
    """One command: usage, its options, then each subcommand one heading below."""
    yield f"{'#' * level} `{parser.prog}`\n"
    if parser.description:
        yield parser.description.strip() + "\n"
    yield f"```\n{_usage(parser)}\n```\n"
    table = "\n".join(_table(parser))
    if table:
        yield table + "\n"
    for sub in subcommands(parser).values():
        yield from command_section(sub, level + 1)


def cli_page(header: str) -> str:
    from builtin_controller.cli import build_parser as builtin_parser
    from mirror.cli import build_parser

    out = ["# Command-line reference\n\n" + header +
           "Every command's options with their defaults, as `--help` prints them. `jobmirror --version` and "
           "`kubectl jobmirror --version` print the package version. Installed by `pip install` of the "
           "package ([Install](../install.md#the-commands)).\n"]
    out += list(command_section(build_parser("jobmirror")))
    plugin = build_parser("kubectl jobmirror")
    out.append("## `kubectl jobmirror`\n\n`kubectl-jobmirror` on `PATH` is the kubectl plugin: the verbs "
               + ", ".join(f"`{v}`" for v in subcommands(plugin)) + " of `jobmirror` above, with the same "
               "options (`kubectl jobmirror describe JOB` = `jobmirror describe JOB`).\n")
    out += list(command_section(builtin_parser()))
    return "\n".join(out)
