"""The API reference documents what users read: every key of ``MemoryRecord`` (a TypedDict shows
only "Bases: dict" otherwise), and every field or attribute of ``Memory``, ``ObjectRef`` and the
outcomes (autodoc lists the members that docs/reference/api.md names, and only those)."""
from __future__ import annotations

import dataclasses
import re
import typing

import kopf_outcomes
from kopf_outcomes import Fatal, Memory, MemoryRecord, ObjectRef, Pending, Retry, Success
from tests.docs.blocks import ROOT


def members() -> dict[str, list[str]]:
    text = (ROOT / "docs" / "reference" / "api.md").read_text()
    [listed] = re.findall(r"^:members: (.*)$", text, flags=re.MULTILINE)[:1]
    pairs = (item.split("=", 1) for item in listed.split(";"))
    return {name.strip(): [member.strip() for member in names.split(",")] for name, names in pairs}


def test_every_key_of_memory_record_is_documented_required_ones_first() -> None:
    doc = MemoryRecord.__doc__ or ""
    documented = re.findall(r"^    ``(\w+)`` \(", doc, flags=re.MULTILINE)
    assert sorted(documented) == sorted(typing.get_type_hints(MemoryRecord))
    always, sometimes = doc.split("Present when they apply:")
    assert set(re.findall(r"^    ``(\w+)`` \(", always, flags=re.MULTILINE)) == MemoryRecord.__required_keys__


def test_memory_object_refs_and_outcomes_have_all_their_members_listed_and_documented() -> None:
    listed = members()
    assert set(listed["Memory"]) == {f.name for f in dataclasses.fields(Memory)} | {"acted_on_this_state"}
    assert listed["ObjectRef"] == list(ObjectRef._fields)
    for outcome in (Success, Pending, Retry, Fatal):
        public = {name for name in typing.get_type_hints(outcome) if not name.startswith("_")}
        assert set(listed[outcome.__name__]) == public - {"args"}, outcome
    source = (ROOT / "src" / "kopf_outcomes" / "outcomes.py").read_text()
    for outcome in (Success, Pending, Retry, Fatal):
        for attribute in listed[outcome.__name__]:
            assert re.search(rf"#: .*\n    {attribute}: ", source), f"{outcome.__name__}.{attribute} has no doc comment"
    assert "LevelName" in kopf_outcomes.__all__
