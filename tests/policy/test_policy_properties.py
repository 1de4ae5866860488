"""
Property tests: any TOML text either loads as a policy or fails with a PolicyError whose every
message is located (file and line) — never a traceback of another kind. And a policy that loads
never makes the plugin fail at runtime.
"""

from __future__ import annotations

import datetime
import re
from typing import Any

import kopf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kopf_outcomes import Fatal, Outcome, Pending, Retry, Success, engine
from kopf_outcomes.engine import PluginFailure
from kopf_outcomes.policy import Policy, PolicyError, loads_policy

from .helpers import KOPFEXAMPLES, plugins_with, run_of
from .toml_text import document

SOURCE = "gen.toml"
LOCATED = re.compile(r"^gen\.toml, line (\d+): .+")

SCOPE_KEYS = [
    "explicit_completion",
    "depends_on",
    "remember",
    "fatal_on_delete",
    "levels",
    "delay",
    "backoff",
    "escalate",
    "exceptions",
]
OTHER_KEYS = [
    "handlers",
    "resources",
    "outcome",
    "level",
    "base",
    "factor",
    "cap",
    "jitter",
    "after_tries",
    "after_seconds",
    "retry",
    "fatal",
    "pending",
]
EXCEPTIONS = [
    "kopf.TemporaryError",
    "kopf.PermanentError",
    "builtins.TimeoutError",
    "builtins.OSError",
    "builtins.ConnectionError",
    "builtins.ValueError",
    "builtins.Exception",
    "nope.Missing",
    "TimeoutError",
    "kopf_outcomes.Retry",
    "os.path",
]
WORDS = [
    "retry",
    "pending",
    "fatal",
    "success",
    "INFO",
    "warning",
    "ERROR",
    "DEBUG",
    "LOUD",
    "retain",
    "release",
    "keep",
    "spec.size",
    "status.deletion",
    "",
    "spec..x",
]

text = st.text(st.characters(exclude_categories=("Cs", "Cc")), max_size=12)
keys = st.one_of(st.sampled_from(SCOPE_KEYS + OTHER_KEYS + EXCEPTIONS), text)
scalars = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(),
    st.sampled_from(WORDS),
    text,
    st.dates(min_value=datetime.date(1, 1, 1)),
    st.just(datetime.time(7, 32)),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=5),
    max_leaves=25,
)
documents = st.dictionaries(keys, values, max_size=8)


def check_text(source: str) -> Policy | None:
    """Load; on failure, every message must be located within the file."""
    try:
        return loads_policy(source, source=SOURCE)
    except PolicyError as e:
        assert e.messages
        for message in e.messages:
            found = LOCATED.match(message)
            assert found, message
            assert 1 <= int(found.group(1)) <= max(1, len(source.splitlines()) + 1), message
        return None


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=documents, headers=st.booleans())
def test_generated_documents_load_or_fail_with_located_messages(
    doc: dict[str, Any], headers: bool
) -> None:
    check_text(document(doc, headers=headers))


# --- documents of the right shape, with values right or wrong --------------------------------

levels = st.sampled_from(["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL", "info", "LOUD", 20])
seconds = st.one_of(
    st.integers(min_value=-5, max_value=10**6),
    st.floats(min_value=-5, max_value=1e6),
    st.sampled_from([float("nan"), float("inf"), "10"]),
)
backoffs = st.fixed_dictionaries(
    {"base": seconds},
    optional={
        "factor": st.one_of(st.floats(min_value=0, max_value=10), st.integers(0, 5)),
        "cap": seconds,
        "jitter": st.floats(min_value=-1, max_value=2),
    },
)
steps = st.fixed_dictionaries(
    {},
    optional={
        "after_tries": st.integers(min_value=-1, max_value=10),
        "after_seconds": seconds,
        "level": levels,
        "outcome": st.sampled_from(["fatal", "retry"]),
    },
)
rules = st.fixed_dictionaries(
    {},
    optional={
        "outcome": st.sampled_from(["success", "pending", "retry", "fatal", "maybe"]),
        "level": levels,
        "delay": seconds,
        "backoff": backoffs,
        "escalate": st.lists(steps, max_size=3),
    },
)
scopes = st.fixed_dictionaries(
    {},
    optional={
        "explicit_completion": st.booleans(),
        "depends_on": st.lists(
            st.sampled_from(["spec.size", "status.deletion", "", "a..b"]), max_size=3
        ),
        "remember": st.booleans(),
        "fatal_on_delete": st.sampled_from(["retain", "release", "keep"]),
        "levels": st.fixed_dictionaries({}, optional={"retry": levels, "fatal": levels}),
        "delay": seconds,
        "backoff": backoffs,
        "escalate": st.lists(steps, max_size=3),
        "exceptions": st.dictionaries(st.sampled_from(EXCEPTIONS), rules, max_size=3),
    },
)
policies = st.builds(
    lambda top, handlers, resources: {
        **top,
        **({"handlers": handlers} if handlers else {}),
        **({"resources": resources} if resources else {}),
    },
    scopes,
    st.dictionaries(st.sampled_from(["fn", "delete_fn", "create_fn/sub1"]), scopes, max_size=2),
    st.dictionaries(
        st.sampled_from(
            [
                "kopfexamples",
                "kopfexamples.kopf.dev",
                "KopfExample",
                "kopfexamples.v1.kopf.dev",
                "pods",
            ]
        ),
        scopes,
        max_size=2,
    ),
)
raised = st.sampled_from(
    [
        kopf.TemporaryError("t", delay=3),
        kopf.PermanentError("p"),
        TimeoutError("slow"),
        ConnectionRefusedError("refused"),
        ValueError("bad"),
        KeyError("k"),
        Pending("waiting"),
    ]
)
returned = st.sampled_from(
    [None, True, False, "text", Retry("r", delay=1), Success(1), Fatal("f"), Pending("waiting")]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    doc=policies,
    headers=st.booleans(),
    handler_id=st.sampled_from(["fn", "delete_fn", "x"]),
    retry=st.integers(0, 50),
    runtime=st.floats(0, 10**6),
    origin=st.one_of(raised, returned),
)
def test_shaped_policies_load_and_never_fail_at_runtime(
    doc: dict[str, Any],
    headers: bool,
    handler_id: str,
    retry: int,
    runtime: float,
    origin: object,
) -> None:
    policy = check_text(document(doc, headers=headers))
    if policy is None:
        return
    plugins = plugins_with(policy)
    run = run_of(
        plugins, handler_id=handler_id, resource=KOPFEXAMPLES, retry=retry, runtime=runtime
    )
    if isinstance(origin, Exception):
        outcome = engine.decide(plugins, run, exception=origin)
    else:
        outcome = engine.decide(plugins, run, result=origin)
    assert outcome is None or isinstance(outcome, Outcome)
    assert not isinstance(outcome, PluginFailure)  # the policy plugin never fails


@settings(max_examples=300, deadline=None)
@given(source=st.text(max_size=200))
def test_arbitrary_text_loads_or_fails_with_located_messages(source: str) -> None:
    check_text(source)


@settings(max_examples=300, deadline=None)
@given(
    doc=policies,
    cut=st.integers(0, 10**6),
    junk=st.sampled_from(["", "[", "]", "=", '"', "{", "\n[[", "x = ", "\n= 1"]),
)
def test_damaged_policies_load_or_fail_with_located_messages(
    doc: dict[str, Any], cut: int, junk: str
) -> None:
    source = document(doc, headers=True)
    position = cut % (len(source) + 1)
    check_text(source[:position] + junk + source[position + 1 :])
