"""Text that came from a worker, a model or an agent, made safe to print.

Anything such a member wrote (a result, a question, a reason, a verdict's output, a
task or member id, an event's data) reaches the terminal only through
:func:`safe_text` (for Rich markup: tables, ``out.print``) or :func:`plain` (for
output printed with ``markup=False``):

- known secrets are redacted (``protocol.secrets``), also from old stores;
- control characters are shown, not obeyed: ESC (so ANSI colours, cursor moves and
  OSC 8 hyperlinks), carriage return, backspace, bell and every other C0 and C1
  control but newline and tab, DEL, and the Unicode direction overrides become
  visible escapes such as ``\\x1b`` or ``\\r``;
- Rich markup (``[bold red]``, ``[link=...]``) is escaped, so it prints as written.
"""

from __future__ import annotations

import re

from rich.markup import escape

from tenure.protocol.secrets import redact_text

_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\r": "\\r", "\x1b": "\\x1b", "\b": "\\b", "\f": "\\f", "\v": "\\v"}


def _visible(match: re.Match[str]) -> str:
    char = match.group(0)
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def plain(value: object) -> str:
    """``value`` as text with known secrets redacted and control characters made visible."""
    return _CONTROLS.sub(_visible, redact_text(str(value)))


def safe_text(value: object) -> str:
    """:func:`plain`, with Rich markup escaped: for tables and ``print`` with markup on."""
    return escape(plain(value))
