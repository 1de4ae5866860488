"""
The seed story (Kopf issue 850): a deletion that waits for an external system to call back.

On deletion, the handler asks the external system to start its work (once per state of the object,
with an idempotency key that makes a repeat after a crash harmless), and is Pending:
the finalizer stays, nothing is logged as an error, and no API call is made while it waits.
When the external system calls back (it sets ``status.deletion.state`` or the annotation
``example.com/deletion``), the handler runs again at once and lets the object go.

    EXTERNAL_SYSTEM_URL=http://127.0.0.1:8088 kopf run --standalone examples/multistep_deletion/example.py
"""
from __future__ import annotations

from typing import Any

import kopf

import kopf_outcomes
from examples.multistep_deletion.external_system import callback_done, start_external_deletion

kopf_outcomes.install()


@kopf.on.delete("kopf.dev", "v1", "kopfexamples")
async def delete_fn(
    namespace: str | None, name: str, status: kopf.Status, annotations: kopf.Annotations,
    logger: kopf.Logger, **_: Any,
) -> kopf_outcomes.Outcome:
    if callback_done(status, annotations):
        logger.info("The external system has finished; releasing the object.")
        return kopf_outcomes.Success()
    memory = kopf_outcomes.recall()
    if not memory.acted_on_this_state:  # once per state, not on every wake-up or restart
        await start_external_deletion(namespace or "", name, request_id=memory.idempotency_key)
        logger.info("Asked the external system to delete its side.")
    return kopf_outcomes.Pending("waiting for the external system to call back")
