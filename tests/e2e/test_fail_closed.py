"""Fail closed on the real API server (issue 41, finding 1): an options plugin that raises must
not take the policy's options with it. Under ``explicit_completion = true`` a deletion handler's
``False`` is "not done", and under ``fatal_on_delete = "retain"`` a ``PermanentError`` keeps the
finalizer: with the failing plugin, both held it no more (the finalizer went)."""
from __future__ import annotations

import asyncio

import pytest

from tests.e2e.conftest import eventually
from tests.e2e.test_outcomes import finalized, gone, runs, start_deleting

OPERATOR = "tests/e2e/operators/failing_options_operator.py"


@pytest.mark.parametrize(("policy", "on_delete", "held"), [
    # The policy's explicit_completion stands: False is "not complete yet", parked (a Pending keeps it).
    ("explicit_completion = true\n", "not-done", "is pending: not complete yet"),
    # The failing plugin's options are unknown: the PermanentError is held, and the handler runs again.
    ('fatal_on_delete = "retain"\n', "permanent-error", "held: the handler's options could not be read"),
])
async def test_a_failing_options_plugin_keeps_the_finalizer(objects, namespace, operator, tmp_path, policy,
                                                            on_delete, held):
    path = tmp_path / "policy.toml"
    path.write_text(policy)
    async with operator(OPERATOR, KOPF_OUTCOMES_POLICY=str(path)) as op:
        await start_deleting(objects, namespace, "held", {"onDelete": on_delete})
        error = await op.wait_for(lambda r: "failed in kopf_outcomes_handler_options" in r.message,
                                  what="the plugin's failure")
        assert error.level == "ERROR" and "FailingOptions" in error.message and "DISABLE_PLUGINS" in error.message
        await op.wait_for(lambda r: held in r.message, what="the hold")
        await asyncio.sleep(2.5)  # a held run is retried (backoff=1): the finalizer stays through them
        assert runs(op) >= (2 if on_delete == "permanent-error" else 1)
        assert await finalized(objects, namespace, "held")


async def test_holds_spend_no_retries_and_the_handler_concludes_once_the_plugin_recovers(
        objects, namespace, operator, tmp_path):
    """Holds are not the handler's tries (issue 41 review): held more times than its ``retries=2``
    while the plugin is down, the handler still runs and succeeds once the plugin answers, and the
    object goes; before, Kopf's pre-run check failed it unrun ("exceeded 2 retries") and the
    policy's retain stranded the object."""
    policy, down = tmp_path / "policy.toml", tmp_path / "down"
    policy.write_text('fatal_on_delete = "retain"\n')
    down.write_text("")
    async with operator("tests/e2e/operators/recovering_options_operator.py",
                        KOPF_OUTCOMES_POLICY=str(policy), OPTIONS_DOWN=str(down)) as op:
        await start_deleting(objects, namespace, "recovers", {})
        async def held_four_times() -> bool:  # two more than retries=2
            return runs(op) >= 4
        await eventually(held_four_times, what="four held runs")
        assert any("held:" in r.message for r in op.records(f"{namespace}/recovers"))
        assert await finalized(objects, namespace, "recovers")
        down.unlink()
        await eventually(lambda: gone(objects, namespace, "recovers"), what="the object to go")
        assert not [r.message for r in op.records(f"{namespace}/recovers") if "exceeded" in r.message]
