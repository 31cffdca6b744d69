"""Settings read from TORCHTPU_* environment variables at import. `import torch` loads torchtpu, so
a bad value must never make it fail: it warns and the default is used. (Settings whose bad value
cannot be worked around, such as the plugin, are reported at first use instead; see _plugins.)"""

from __future__ import annotations

import os
import warnings


def _ignored(name: str, text: str, expected: str, default: object) -> None:
    warnings.warn(f"torchtpu: {name} must be {expected}, not {text!r}; using {default}",
                  stacklevel=3)


def choice(name: str, choices: tuple[str, ...], default: str) -> str:
    """The variable's value, one of `choices` (case and surrounding spaces ignored)."""
    text = os.environ.get(name, "").strip().lower()
    if not text:
        return default
    if text not in choices:
        _ignored(name, text, "one of " + ", ".join(choices), default)
        return default
    return text


def flag(name: str, default: bool) -> bool:
    """0/false/off/no or 1/true/on/yes."""
    text = os.environ.get(name, "").strip().lower()
    if not text:
        return default
    if text in ("1", "true", "on", "yes"):
        return True
    if text in ("0", "false", "off", "no"):
        return False
    _ignored(name, text, "0 or 1", int(default))
    return default


def bounded_int(name: str, default: int, low: int, high: int) -> int:
    """An integer in [low, high]."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        _ignored(name, text, f"an integer from {low} to {high}", default)
        return default
    return value
