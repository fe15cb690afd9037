"""Typer, started lean: the command line builds only the command it runs, and converts its options
without a pydantic validator per option.

Typer (0.29) builds every command of an app on every call, and converts each option's value
through a pydantic ``TypeAdapter`` built on first use: importing pydantic alone cost 0.1–0.3 s
before ``probe info`` read a byte (bench/bench_cli.py). The commands here take plain ``str``,
``int``, ``float``, ``bool``, ``Enum`` and ``list[str]`` options, which need no validator: those are
converted directly, with Click's own messages; anything else keeps Typer's path.

The lazy command list needs only names that every Typer from the floor in pyproject.toml on has
(``typer.core``, ``typer.main``, ``typer.BadParameter``). The direct conversion sets Typer's private
per-option converter (``_runtime_param``, next to ``type_descriptor``; Typer >= 0.29, where the
pydantic path began): :func:`lighten` checks that both are there and leaves every option on Typer's
own path when they are not (older Typer, which has no pydantic path to avoid, or a later one that
renamed them).
tests/test_lean_fallback.py runs the command line both ways.
"""
from __future__ import annotations

import inspect
from enum import Enum
from typing import Any

from typer import BadParameter   # public in every Typer (Click's class, vendored or not)
from typer.core import TyperCommand, TyperGroup
from typer.main import get_command_from_info, get_command_name


class _Plain:
    """The runtime conversion of one plain option (Typer's ``RuntimeParam`` contract: ``coerce``)."""

    def __init__(self, annotation: Any, parameter_info: Any):
        self.annotation = annotation
        self.lo = getattr(parameter_info, "min", None)
        self.hi = getattr(parameter_info, "max", None)

    def coerce(self, value: Any, param, ctx) -> Any:
        many = param.multiple or param.nargs == -1
        if value is None:
            return () if many else None
        if many:
            if isinstance(value, str):
                raise BadParameter("Value must be an iterable.", ctx=ctx, param=param)
            return [self._one(v, param, ctx) for v in value]
        return self._one(value, param, ctx)

    def _one(self, value: Any, param, ctx) -> Any:
        kind = self.annotation
        if kind is str:
            return value if isinstance(value, str) else str(value)
        if kind is bool:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in ("1", "true", "t", "yes", "y", "on"):
                return True
            if text in ("0", "false", "f", "no", "n", "off"):
                return False
            raise BadParameter(f"{value!r} is not a valid boolean.", ctx=ctx, param=param)
        if isinstance(kind, type) and issubclass(kind, Enum):
            if isinstance(value, kind):
                return value
            for member in kind:
                if member.value == value:
                    return member
            allowed = ", ".join(repr(m.value) for m in kind)
            raise BadParameter(f"{value!r} is not one of {allowed}.", ctx=ctx, param=param)
        try:
            number = kind(value) if not isinstance(value, bool) else None
        except (TypeError, ValueError):
            number = None
        if number is None:
            name = "integer" if kind is int else "float"
            raise BadParameter(f"{value!r} is not a valid {name}.", ctx=ctx, param=param)
        if (self.lo is not None and number < self.lo) or (self.hi is not None and number > self.hi):
            rng = (f"x>={self.lo}" if self.hi is None else f"x<={self.hi}" if self.lo is None
                   else f"{self.lo}<=x<={self.hi}")
            raise BadParameter(f"{number} is not in the range {rng}.", ctx=ctx, param=param)
        return number


def _plain_kind(annotation: Any):
    """The element type of a plain annotation (str, int, float, bool, an Enum, list of those), else None."""
    from typing import get_args, get_origin

    if get_origin(annotation) is list:
        (annotation,) = get_args(annotation) or (None,)
    if annotation in (str, int, float, bool) or (isinstance(annotation, type) and issubclass(annotation, Enum)):
        return annotation
    return None


def _hooks(param) -> Any:
    """The parameter's type descriptor when Typer converts it through a replaceable ``_runtime_param``
    not yet built (Typer >= 0.29), else None: then Typer's own conversion stays."""
    desc = getattr(param, "type_descriptor", None)
    if desc is None or getattr(param, "_runtime_param", 0) is not None:   # 0: the slot does not exist
        return None
    if not all(hasattr(desc, name) for name in ("annotation", "parameter_info", "file_annotation")):
        return None
    return desc


def lighten(params) -> list:
    """Give every plain parameter the direct conversion instead of a pydantic validator."""
    for param in params:
        desc = _hooks(param)
        if desc is None or desc.file_annotation is not None:
            continue
        kind = _plain_kind(desc.annotation)
        if kind is not None:
            param._runtime_param = _Plain(kind, desc.parameter_info)
    return params


def _short_help(help: str, max_length: int) -> str:
    """The first sentence of ``help`` cut to ``max_length`` characters, as Click shortens a command's
    help for a command list (Click's ``make_default_short_help``, kept here: Typer >= 0.26 vendors
    Click privately, older Typer uses Click's, and neither is a public name of Typer)."""
    paragraph_end = help.find("\n\n")
    words = (help[:paragraph_end] if paragraph_end != -1 else help).split()
    if words[:1] == ["\b"]:                # a "no rewrap" marker
        words = words[1:]
    if not words:
        return ""
    total, last = 0, len(words) - 1
    for i, word in enumerate(words):
        total += len(word) + (i > 0)
        if total > max_length:
            break
        if word[-1] == ".":                 # a sentence ends: cut there, no "..."
            return " ".join(words[:i + 1])
        if total == max_length and i != last:
            break
    else:
        return " ".join(words)
    total += len("...")
    while i > 0:                            # drop words until the "..." fits
        total -= len(words[i]) + (i > 0)
        if total <= max_length:
            break
        i -= 1
    return " ".join(words[:i]) + "..."


class LeanCommand(TyperCommand):
    """A Typer command whose plain parameters (the help flag included) convert without pydantic."""

    def get_params(self, ctx) -> list:
        return lighten(super().get_params(ctx))


class LeanGroup(TyperGroup):
    """A Typer group that builds a command only when it is run (or its help is shown)."""

    def __init__(self, app, **kw):
        self._infos = {(i.name or get_command_name(i.callback.__name__)): i for i in app.registered_commands}
        self._markup = app.rich_markup_mode
        super().__init__(commands={}, rich_markup_mode=app.rich_markup_mode, **kw)

    def get_params(self, ctx) -> list:
        return lighten(super().get_params(ctx))

    def list_commands(self, ctx) -> list[str]:
        return list(self._infos)

    def get_command(self, ctx, name: str):
        if name not in self.commands and name in self._infos:
            info = self._infos[name]
            if info.cls in (None, TyperCommand):
                info.cls = LeanCommand
            self.commands[name] = get_command_from_info(info, pretty_exceptions_short=True,
                                                        rich_markup_mode=self._markup)
        return self.commands.get(name)

    def format_commands(self, ctx, formatter) -> None:
        """The command list as Click writes it, short help from the docstrings; nothing is built for it."""
        limit = formatter.width - 6 - max(len(n) for n in self._infos)
        rows = [(name, info.short_help or _short_help(info.help or inspect.getdoc(info.callback) or "",
                                                                    limit))
                for name, info in self._infos.items()]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def lean_command(app):
    """The click command of a Typer ``app``, built lean (see the module docstring); the options before
    the command word (``--version``) are those of the app's callback, built by Typer from an app that
    has the callback and no command."""
    from typer import Typer
    from typer.main import get_group

    head = Typer(rich_markup_mode=app.rich_markup_mode)
    head.registered_callback = app.registered_callback
    shell = get_group(head)
    return LeanGroup(app, name=app.info.name or None, help=app.info.help, no_args_is_help=app.info.no_args_is_help,
                     params=shell.params, callback=shell.callback)
