"""What a signature covers: the canonical bytes of a body, with its team.

A signed body (an envelope, a result, a task spec) carries a ``signature`` field;
the signature covers every other field of the body as it is dumped to JSON, plus
the team path (a body signed for one team is worthless in another), serialised
canonically: keys sorted, no whitespace, UTF-8. Both sides compute these bytes
from the parsed model (``to_dict``), so what was signed and what is verified are
the same whatever JSON library sat in between. The cryptography is in
``tenure.coord.credentials``.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

SIGNATURE_FIELD = "signature"


def canonical(team: str, kind: str, body: BaseModel | dict[str, Any]) -> bytes:
    """The bytes a signature over ``body`` (an envelope, a result, a spec) covers."""
    fields = body if isinstance(body, dict) else body.model_dump(mode="json", by_alias=True)
    unsigned = {k: v for k, v in fields.items() if k != SIGNATURE_FIELD}
    payload = {"team": team, "kind": kind, "body": unsigned}
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
