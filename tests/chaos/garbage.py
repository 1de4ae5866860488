"""Every kind of garbage an annotation can hold where the operator keeps its memory."""
from __future__ import annotations

import json

HANDLER = "delete_fn"
DEEP = 1500  # levels of nesting: beyond Python's default recursion limit in json


def _record(**fields: object) -> str:
    return json.dumps({HANDLER: {"digest": "0", "outcome": "pending", "reason": "r", **fields}})


def values() -> dict[str, str]:
    """name -> the annotation's value (annotations are strings; the garbage is inside)."""
    return {
        "empty": "",
        "not-json": "{",
        "json-null": "null",
        "json-number": "42",
        "json-string": '"memory"',
        "json-list": "[1, 2, 3]",
        "huge-int": "1" * 5000,
        "nan": json.dumps({HANDLER: float("nan")}),
        "record-is-list": json.dumps({HANDLER: ["x"]}),
        "record-is-int": json.dumps({HANDLER: 7}),
        "outcome-list": _record(outcome=["x"]),
        "outcome-dict": _record(outcome={"x": 1}),
        "outcome-unknown": _record(outcome="exploded"),
        "digest-int": _record(digest=5),
        "reason-dict": _record(reason={"a": 1}),
        "since-int": _record(since=1),
        "parked-string": _record(parked="yes"),
        "depends-on-string": _record(depends_on="spec"),
        "depends-on-ints": _record(depends_on=[1, 2]),
        "deep-list": "[" * DEEP + "]" * DEEP,
        "deep-dict": json.dumps({HANDLER: "x"})[:-1].replace('"x"', '{"a":' * DEEP + "1" + "}" * DEEP) + "}",
        "big-reason": _record(reason="x" * 190_000),
        "many-handlers": json.dumps({f"h{i}": {"digest": "0", "outcome": "pending", "reason": ""}
                                     for i in range(3000)}),
        "unicode": _record(reason="\udcff\u0000\u202e"),
        "forged-pending": _record(),
        "forged-success": _record(outcome="success"),
        "forged-retained": _record(outcome="retained", parked=True),
    }


FORGED_RELEASE = "forged-retained-release"  # the forged record plus the release annotation


def big(i: int) -> str:
    """The i-th distinct garbage value of ~190 KB, for the memory bound."""
    return json.dumps({HANDLER: {"outcome": ["x"], "pad": f"{i:06d}" + "y" * 190_000}})
