"""Command-line plumbing every ``rlperf`` subcommand shares: the parser whose errors are one
line, ``KEY=VALUE`` config overrides, and the checks of numeric flags.

Each subcommand's module builds its own parser from these, so no subcommand imports
``rlperf.cli`` (which imports them all).
"""

from __future__ import annotations

import argparse
import math
from typing import NoReturn

from rlperf.config.load import parse_override
from rlperf.core.errors import ConfigError, UserInputError


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose errors are one line and exit 2 (plain argparse prints usage first)."""

    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)


def config_overrides(tokens: list[str]) -> list[tuple[str, object]]:
    """Dotted config overrides from the arguments argparse did not know: ``KEY=VALUE``,
    ``--KEY=VALUE`` or ``--KEY VALUE``."""
    out: list[tuple[str, object]] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.startswith("--") and "=" in tok:
            out.append(parse_override(tok[2:]))
        elif tok.startswith("--"):
            if i + 1 >= len(tokens) or tokens[i + 1].startswith("--"):
                raise ConfigError(f"option {tok} needs a value")
            out.append(parse_override(f"{tok[2:]}={tokens[i + 1]}"))
            i += 1
        elif "=" in tok:
            out.append(parse_override(tok))
        else:
            raise ConfigError(
                f"unrecognized argument {tok!r}; config overrides look like ppo.learning_rate=1e-4"
            )
        i += 1
    return out


def int_flag(flag: str, text: str | None, minimum: int = 1) -> int | None:
    """``text`` as an integer >= ``minimum`` (None stays None); a one-line error otherwise."""
    if text is None:
        return None
    wanted = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
    try:
        value = int(text)
    except ValueError:
        raise UserInputError(f"{flag} must be {wanted}, got {text!r}") from None
    if value < minimum:
        raise UserInputError(f"{flag} must be {wanted}, got {value}")
    return value


def positive_float_flag(flag: str, text: str | None) -> float | None:
    """``text`` as a number > 0 (None stays None); a one-line error otherwise."""
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        raise UserInputError(f"{flag} must be a positive number, got {text!r}") from None
    if not value > 0:
        raise UserInputError(f"{flag} must be a positive number, got {text!r}")
    return value


def finite_float_flag(flag: str, text: str | None) -> float | None:
    """``text`` as any finite number, negative too (None stays None); a one-line error
    otherwise: nan and inf would pass every comparison or none."""
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        raise UserInputError(f"{flag} must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise UserInputError(f"{flag} must be a finite number, got {text!r}")
    return value


def duration_flag(flag: str, text: str) -> float:
    """Seconds from ``90``, ``90s``, ``30m`` or ``2h``; a one-line error otherwise."""
    units = {"s": 1.0, "m": 60.0, "h": 3600.0}
    number, unit = (text[:-1], text[-1]) if text[-1:] in units else (text, "s")
    try:
        seconds = float(number) * units[unit]
    except ValueError:
        raise UserInputError(
            f"{flag} must be a duration such as 90, 90s, 30m or 2h, got {text!r}"
        ) from None
    if not seconds > 0:
        raise UserInputError(f"{flag} must be positive, got {text!r}")
    return seconds
