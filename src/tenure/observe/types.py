"""The values a span carries, shared by the facade and the OpenTelemetry side."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

Value = str | bool | int | float | list[str] | tuple[str, ...]
Attributes = Mapping[str, Value | None]
Kind = Literal["internal", "client"]
