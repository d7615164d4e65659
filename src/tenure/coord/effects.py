"""Side effects under an idempotency key: run at most once, replay the record after."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tenure.protocol.errors import EffectInProgress
from tenure.store import Store


def run_effect(
    store: Store,
    team: str,
    key: str,
    fn: Callable[[], Any],
    *,
    epoch: int,
    holder: str,
    claim_seconds: float = 300.0,
    wait_seconds: float = 0.0,
) -> Any:
    """Run ``fn`` once for ``key``; a later call with the same key returns its result.

    If another live holder is running it, wait up to ``wait_seconds`` for its
    result, then raise ``EffectInProgress``. If ``fn`` raises, the claim is
    dropped so a later try may run it.
    """
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            ticket = store.effect_begin(
                team, key, epoch=epoch, holder=holder, claim_seconds=claim_seconds
            )
            break
        except EffectInProgress:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.05)
    if ticket.status == "done":
        return ticket.result
    try:
        result = fn()
    except BaseException:
        store.effect_abort(team, key, holder=holder)
        raise
    return store.effect_finish(team, key, holder=holder, result=result).result
