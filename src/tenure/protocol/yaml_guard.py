"""YAML read safely: an alias bomb or a deep nest is refused before anything is built.

PyYAML's safe loader builds every alias in full (661 bytes of nested aliases can
ask for gigabytes) and recurses once per nesting level (libyaml's composer crashes
the process on a deep enough nest). So the document's events are read first — a
flat stream, no recursion — counting nesting, alias uses and the number of values
the document would hold once every alias is expanded; only a document within
``protocol.limits`` is then loaded.
"""

from __future__ import annotations

from typing import Any

import yaml

from tenure.protocol.errors import ProtocolError
from tenure.protocol.limits import (
    MAX_JSON_DEPTH,
    MAX_PLAN_NODES,
    MAX_YAML_ALIASES,
    over,
)

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
NESTED = f"lists and mappings nested at most {MAX_JSON_DEPTH} deep"
"""What a nest too deep is told, whichever finds it: this screen, or libyaml's own
limit (about 1,000 levels), whose scanner reads a one-line nest before the screen
sees it and says only ``exceeded maximum nesting depth``."""
_STARTS = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_ENDS = (yaml.SequenceEndEvent, yaml.MappingEndEvent)


def load_yaml(text: str, *, source: str, offset: int = 0) -> Any:
    """The one document in ``text``, or one ``ProtocolError`` naming the line
    (counted from the file's start: ``offset`` lines precede ``text``)."""
    try:
        _screen(text, source, offset)
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a safe loader
    except ProtocolError:
        raise
    except RecursionError:
        raise ProtocolError("(yaml)", NESTED, source=source) from None
    except yaml.YAMLError as exc:
        raise _translate(exc, text, offset, source) from None
    except Exception as exc:  # noqa: BLE001 - a tag or value PyYAML's constructor chokes on
        said = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise ProtocolError("(yaml)", f"valid YAML values ({said})", source=source) from None


class _Count:
    """Values of the collection being read (with what its aliases expand to)."""

    __slots__ = ("anchor", "values")

    def __init__(self, anchor: str | None) -> None:
        self.anchor = anchor
        self.values = 1


def _screen(text: str, source: str, offset: int) -> None:
    loader = _Loader(text)
    try:
        sizes: dict[str, int] = {}  # anchor -> values its node holds, aliases expanded
        open_: list[_Count] = []
        total = aliases = 0
        while loader.check_event():
            event = loader.get_event()
            line = f"line {event.start_mark.line + 1 + offset}"
            if isinstance(event, yaml.AliasEvent):
                aliases += 1
                if aliases > MAX_YAML_ALIASES:
                    raise ProtocolError(line, over(aliases, MAX_YAML_ALIASES, "aliases"), source=source)
                if any(each.anchor == event.anchor for each in open_):
                    raise ProtocolError(line, "no alias inside the node it names", source=source)
                grew = sizes.get(str(event.anchor), 1)
            elif isinstance(event, yaml.ScalarEvent):
                grew = 1
                if event.anchor:
                    sizes[event.anchor] = 1
            elif isinstance(event, _STARTS):
                if len(open_) >= MAX_JSON_DEPTH:
                    raise ProtocolError(line, NESTED, source=source)
                open_.append(_Count(event.anchor))
                total += 1
                _check_total(total, line, source)
                continue
            elif isinstance(event, _ENDS):
                done = open_.pop()
                if done.anchor:
                    sizes[done.anchor] = done.values
                if open_:
                    open_[-1].values += done.values
                continue
            else:
                continue
            total += grew
            _check_total(total, line, source)
            if open_:
                open_[-1].values += grew
    finally:
        loader.dispose()


def _check_total(total: int, line: str, source: str) -> None:
    if total > MAX_PLAN_NODES:
        raise ProtocolError(
            line,
            f"{over(total, MAX_PLAN_NODES, 'values or more')} (with its aliases expanded)",
            source=source,
        )


def _translate(exc: yaml.YAMLError, text: str, offset: int, source: str) -> ProtocolError:
    mark = getattr(exc, "problem_mark", None)
    position = getattr(exc, "position", None)  # a ReaderError: a character YAML refuses
    if mark is not None:
        where = f"line {mark.line + 1 + offset}"
    elif isinstance(position, int):
        where = f"line {text.count(chr(10), 0, position) + 1 + offset}"
    else:
        where = "(yaml)"
    problem = getattr(exc, "problem", None) or getattr(exc, "reason", None) or str(exc)
    if "nesting depth" in str(problem):  # libyaml's limit: the document is past ours too
        return ProtocolError(where, NESTED, source=source)
    return ProtocolError(where, f"valid YAML ({problem})", source=source)
