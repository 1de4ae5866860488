"""What counts as a view older than this process's own memory write (``_kopf/own_writes.py``)."""
from __future__ import annotations

from typing import Any

import pytest

from kopf_outcomes._kopf import own_writes
from kopf_outcomes._kopf.internals import OperatorWrites
from kopf_outcomes._kopf.own_writes import OwnWrites, version_of


def view(version: str | None, uid: str = "u1") -> dict[str, Any]:
    return {"metadata": {"uid": uid, "resourceVersion": version}}


@pytest.mark.parametrize(("value", "expected"), [
    ("7", (1, "7")), ("1234567890123", (13, "1234567890123")), ("7~which~never~arrives", (1, "7")),
    ("07", None), ("0", None), ("", None), ("abc", None), ("-1", None), ("٣", None), (None, None), (7, None),
])
def test_only_a_kep_5504_resource_version_compares(value: object, expected: tuple[int, str] | None) -> None:
    assert version_of(value) == expected


def test_a_view_before_the_write_is_older_and_one_at_or_after_it_ends_the_wait() -> None:
    writes = OwnWrites()
    writes.wrote(view("5"), "9")
    assert writes.older(view("8"))
    assert not writes.older(view("8", uid="u2"))  # another object: nothing of ours
    assert not writes.older(view("10"))  # after it (a relisting that skipped its event, say)
    assert not writes.older(view("8"))  # seen: an older view now is the lagging server's (the documented limit)


@pytest.mark.parametrize("returned", [None, "", "opaque-v2", True])
def test_a_write_whose_version_cannot_be_compared_holds_nothing(returned: object) -> None:
    writes = OwnWrites()
    writes.wrote(view("5"), "9")
    writes.wrote(view("9"), returned)  # the next write: its version unknown (Kopf 1.37 returns none)
    assert not writes.older(view("8"))


@pytest.mark.parametrize("version", ["opaque", None])
def test_a_view_whose_version_cannot_be_compared_is_left_to_kopf_and_does_not_end_the_wait(
        version: str | None) -> None:
    writes = OwnWrites()
    writes.wrote(view("5"), "9")
    assert not writes.older(view(version))
    assert writes.older(view("8"))  # still awaited: a view we cannot place is not one at or after it


def test_an_object_gone_is_forgotten() -> None:
    writes = OwnWrites()
    writes.wrote(view("5"), "9")
    writes.gone(view("9"))
    assert not writes.older(view("8"))


def test_past_the_limit_the_oldest_object_is_forgotten(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(own_writes, "LIMIT", 2)
    writes = OwnWrites()
    for uid in ("a", "b", "c"):
        writes.wrote(view("5", uid), "9")
    assert [writes.older(view("8", uid)) for uid in ("a", "b", "c")] == [False, True, True]


def test_only_the_held_cycles_patch_is_restored_and_only_once() -> None:
    writes, patch, other = OwnWrites(), {"a": {"b": 1}}, {"a": {"b": 1}}
    writes.hold(patch, purged=None)
    patch["a"]["b"] = 2
    other["c"] = 3
    writes.restore(other)  # another cycle's patch: left as it is, and the hold stays its own cycle's
    assert other == {"a": {"b": 1}, "c": 3}
    writes.restore(patch)
    assert patch == {"a": {"b": 1}}
    patch["a"]["b"] = 2
    writes.restore(patch)  # spent
    assert patch == {"a": {"b": 2}}
    writes.hold(patch, purged=None)
    patch["c"] = 3
    patch["a"]["d"] = [4]
    writes.restore(patch)
    assert patch == {"a": {"b": 2}}  # what it held when the cycle began stays; what the cycle added goes
    patch["c"] = 3
    writes.restore(patch)
    assert patch == {"a": {"b": 2}, "c": 3}


def test_a_held_cycle_whose_view_kopf_purged_keeps_its_patch_but_kopfs_storages_writes() -> None:
    storages = OperatorWrites(prefixes=("kopf.zalando.org",), fields=(("status", "kopf"),))
    writes = OwnWrites()
    patch = {"metadata": {"annotations": {"kopf.zalando.org/parks": None, "example.com/seen": "1"}},
             "status": {"kopf": {"progress": {"parks": None}}, "seen": 1}}
    writes.hold(patch, purged=storages)
    patch["status"]["kopf"] = {"progress": {"parks": {"started": "then"}}}
    writes.restore(patch)
    assert patch == {"metadata": {"annotations": {"example.com/seen": "1"}}, "status": {"seen": 1}}
    only_kopfs = {"metadata": {"annotations": {"kopf.zalando.org/parks": None}}, "status": {"kopf": {}}}
    writes.hold(only_kopfs, purged=storages)
    writes.restore(only_kopfs)
    assert only_kopfs == {}  # no empty stanza left: nothing to send


def test_a_value_in_the_patch_is_kept_as_it_is_not_copied() -> None:
    class Uncopyable:
        def __deepcopy__(self, memo: object) -> None:
            raise TypeError("not copyable")

    value = Uncopyable()
    writes, patch = OwnWrites(), {"status": {"x": value}}
    writes.hold(patch, purged=None)
    patch["status"]["y"] = 1
    writes.restore(patch)
    assert patch == {"status": {"x": value}} and patch["status"]["x"] is value
