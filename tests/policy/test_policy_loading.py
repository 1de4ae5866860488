"""Loading and validation: the TOML shape, pyproject.toml, and errors that say where and what."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import kopf_outcomes
from kopf_outcomes.policy import (
    Backoff,
    Escalation,
    ExceptionRule,
    Levels,
    Policy,
    PolicyError,
    PolicyPlugin,
    Scope,
    load_policy,
    loads_policy,
)
from kopf_outcomes.policy.plugin import POLICY_PLUGIN_NAME

EXAMPLES = Path(__file__).parents[2] / "examples" / "policies"

FULL = """\
# the top level is the global scope
explicit_completion = false
delay = 30
exceptions."kopf.TemporaryError" = { level = "INFO" }
escalate = [{ after_tries = 5, level = "ERROR" }]

[levels]
retry = "warning"
fatal = "CRITICAL"

[exceptions."builtins.TimeoutError"]
outcome = "retry"
level = "WARNING"
backoff = { base = 10, factor = 2, cap = 300, jitter = 0.1 }

[[exceptions."builtins.TimeoutError".escalate]]
after_seconds = 3600
outcome = "fatal"

[handlers.delete_fn]
explicit_completion = true
fatal_on_delete = "retain"
depends_on = ["status.deletion"]
remember = true

[resources."kopfexamples.kopf.dev"]
backoff = { base = 1 }
"""


def write(tmp_path: Path, text: str, name: str = "policy.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def problems(text: str, tmp_path: Path, name: str = "policy.toml") -> list[str]:
    path = write(tmp_path, text, name)
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    assert all(message.startswith(str(path)) for message in info.value.messages)
    return [message[len(str(path)) :] for message in info.value.messages]


def test_full_shape_loads_into_the_model() -> None:
    assert loads_policy(FULL) == Policy(
        defaults=Scope(
            explicit_completion=False,
            delay=30.0,
            exceptions={
                "kopf.TemporaryError": ExceptionRule(level=logging.INFO),
                "builtins.TimeoutError": ExceptionRule(
                    outcome="retry",
                    level=logging.WARNING,
                    backoff=Backoff(base=10, factor=2, cap=300, jitter=0.1),
                    escalate=(Escalation(after_seconds=3600, outcome="fatal"),),
                ),
            },
            escalate=(Escalation(after_tries=5, level=logging.ERROR),),
            levels=Levels(retry=logging.WARNING, fatal=logging.CRITICAL),
        ),
        handlers={
            "delete_fn": Scope(
                explicit_completion=True,
                fatal_on_delete="retain",
                depends_on=("status.deletion",),
                remember=True,
            )
        },
        resources={"kopfexamples.kopf.dev": Scope(backoff=Backoff(base=1))},
    )


@pytest.mark.parametrize("text", ["", "\n\n", "# nothing but a comment\n"])
def test_empty_file_is_a_valid_empty_policy(tmp_path: Path, text: str) -> None:
    assert load_policy(write(tmp_path, text)) == Policy()


def test_pyproject_table(tmp_path: Path) -> None:
    text = (
        '[project]\nname = "op"\n\n[tool.kopf-outcomes]\ndelay = 5\n'
        "[tool.kopf-outcomes.handlers.fn]\nremember = true\n"
    )
    policy = load_policy(write(tmp_path, text, "pyproject.toml"))
    assert policy == Policy(defaults=Scope(delay=5), handlers={"fn": Scope(remember=True)})


def test_pyproject_errors_name_the_whole_table_path(tmp_path: Path) -> None:
    text = '[project]\nname = "op"\n\n[tool.kopf-outcomes.handlers.fn]\nremember = "yes"\n'
    assert problems(text, tmp_path, "pyproject.toml") == [
        ", line 5: [tool.kopf-outcomes.handlers.fn] remember: expected true or false, "
        'got a string ("yes")'
    ]


def test_pyproject_without_the_table_is_an_error(tmp_path: Path) -> None:
    assert problems('[project]\nname = "op"\n', tmp_path, "pyproject.toml") == [
        ": no [tool.kopf-outcomes] table: the policy of a pyproject.toml lives there"
    ]


def test_syntax_error_is_located(tmp_path: Path) -> None:
    assert problems("delay = 5\nlevels = {\n", tmp_path) == [
        ", line 2: TOML syntax error: "
        "Invalid initial character for a key part (at line 2, column 11)"
    ]


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read the policy file"):
        load_policy(tmp_path / "nope.toml")


def test_all_errors_of_a_file_are_reported_together_each_located(tmp_path: Path) -> None:
    text = """\
delay = -1
explicit_complet = true

[exceptions."no_such_http_client.Timeout"]
outcome = "retry"
level = "LOUD"

[exceptions."builtins.KeyError"]
outcome = "maybe"

[handlers.delete_fn]
fatal_on_delete = "keep"
depends_on = "status.deletion"
remember = 1

[[handlers.delete_fn.escalate]]
after_tries = 3
outcome = "fatl"
"""
    assert problems(text, tmp_path) == [
        ", line 1: delay: must be a number of seconds from 0 to 31622400 (a year), got -1",
        ", line 2: explicit_complet: unknown key 'explicit_complet' (did you mean "
        "'explicit_completion'?); allowed here: backoff, delay, depends_on, escalate, exceptions, "
        "explicit_completion, fatal_on_delete, handlers, ignore, levels, remember, resources",
        ", line 4: [exceptions] \"no_such_http_client.Timeout\": cannot import 'no_such_http_client' "
        "(No module named 'no_such_http_client')",
        ', line 6: [exceptions."no_such_http_client.Timeout"] level: expected a level name: DEBUG, '
        'INFO, WARNING, ERROR, CRITICAL, got a string ("LOUD")',
        ', line 9: [exceptions."builtins.KeyError"] outcome: expected one of "success", "pending", '
        '"retry", "fatal", got a string ("maybe")',
        ', line 12: [handlers.delete_fn] fatal_on_delete: expected one of "release", "retain", '
        'got a string ("keep")',
        ", line 13: [handlers.delete_fn] depends_on: expected an array of field paths, such as "
        '["spec.size"], got a string ("status.deletion")',
        ", line 14: [handlers.delete_fn] remember: expected true or false, got a number (1)",
        ', line 18: [handlers.delete_fn.escalate[0]] outcome: expected one of "fatal", '
        'got a string ("fatl")',
    ]


@pytest.mark.parametrize(
    "line, expected",
    [
        ('delay = "5"', 'delay: expected a number of seconds, got a string ("5")'),
        ("delay = nan", "delay: must be a number of seconds from 0 to 31622400 (a year), got nan"),
        ("delay = inf", "delay: must be a number of seconds from 0 to 31622400 (a year), got inf"),
        # What check-policy accepts must never fail at run time: Retry() takes no delay over a year.
        ("delay = 1e10", "delay: must be a number of seconds from 0 to 31622400 (a year), got 1e+10"),
        ("backoff = { base = 1, cap = 1e9 }",
         "[backoff] cap: must be a number of seconds from 0 to 31622400 (a year), got 1e+09"),
        ("levels.retry = 5", "[levels] retry: expected a level name: DEBUG, INFO, WARNING, ERROR, CRITICAL, "
                             "got a number (5)"),
        (
            "delay = 2024-01-01",
            "delay: expected a number of seconds, got a date or time (2024-01-01)",
        ),
        (
            "backoff = { base = 1 }\ndelay = 1",
            "backoff: set either delay (fixed) or backoff (exponential), not both",
        ),
        ("backoff = 5", "backoff: expected a table, got a number (5)"),
        ("backoff = { factor = 3 }", "backoff: the key 'base' is required here"),
        (
            "backoff = { base = 1, factor = 0.5 }",
            "[backoff] factor: must be a number of at least 1, got 0.5",
        ),
        (
            "backoff = { base = 1, jitter = 2 }",
            "[backoff] jitter: must be a fraction from 0 to 1, got 2",
        ),
        (
            "backoff = { base = -1 }",
            "[backoff] base: must be a number of seconds from 0 to 31622400 (a year), got -1",
        ),
        (
            "backoff = { base = 1, cap = -1 }",
            "[backoff] cap: must be a number of seconds from 0 to 31622400 (a year), got -1",
        ),
        (
            "backoff = { base = 1, max = 5 }",
            "[backoff] max: unknown key 'max'; allowed here: base, cap, factor, jitter",
        ),
        (
            'levels = { pending = "INFO" }',
            "[levels] pending: unknown key 'pending' (Pending has no "
            "level to set: INFO when it begins, DEBUG while unchanged); "
            "allowed here: fatal, retry",
        ),
        (
            "levels = { retry = 20 }",
            "[levels] retry: expected a level name: DEBUG, INFO, WARNING, ERROR, "
            "CRITICAL, got a number (20)",
        ),
        ("escalate = { after_tries = 1 }", "escalate: expected an array of tables, got a table"),
        (
            'escalate = [{ level = "ERROR" }]',
            "escalate[0]: set exactly one of after_tries or after_seconds",
        ),
        (
            'escalate = [{ after_tries = 1, after_seconds = 1, level = "ERROR" }]',
            "escalate[0]: set exactly one of after_tries or after_seconds",
        ),
        (
            "escalate = [{ after_tries = 1 }]",
            'escalate[0]: set level, or outcome = "fatal", or both',
        ),
        (
            'escalate = [{ after_tries = 0, level = "ERROR" }]',
            "[escalate[0]] after_tries: must be a whole number of at least 1, got 0",
        ),
        (
            'escalate = [{ after_tries = 1.5, level = "ERROR" }]',
            "[escalate[0]] after_tries: expected a whole number, got a number (1.5)",
        ),
        (
            'escalate = [{ after_seconds = -5, outcome = "fatal" }]',
            "[escalate[0]] after_seconds: must be a number of seconds, zero or more, got -5",
        ),
        ("escalate = [1]", "escalate[0]: expected a table, got a number (1)"),
        (
            'depends_on = ["spec..size"]',
            "depends_on[0]: must be a field path such as \"spec.size\", got 'spec..size'",
        ),
        (
            "depends_on = [1]",
            'depends_on: expected an array of field paths, such as ["spec.size"], got an array',
        ),
        (
            "explicit_completion = 1",
            "explicit_completion: expected true or false, got a number (1)",
        ),
        ("handlers = 1", "handlers: expected a table, got a number (1)"),
        ("handlers.fn = 1", "[handlers] fn: expected a table, got a number (1)"),
        (
            "handlers.fn.resources = {}",
            "[handlers.fn] resources: unknown key 'resources' (handlers and "
            "resources are tables at the top level only); allowed here: "
            "backoff, delay, depends_on, escalate, exceptions, explicit_completion, "
            "fatal_on_delete, ignore, levels, remember",
        ),
        (
            'handlers." fn" = {}',
            '[handlers] " fn": must be a non-empty name without surrounding spaces',
        ),
        (
            'resources."" = {}',
            '[resources] "": must be a non-empty name without surrounding spaces',
        ),
    ],
)
def test_each_kind_of_problem(tmp_path: Path, line: str, expected: str) -> None:
    assert problems(line + "\n", tmp_path) == [f", line 1: {expected}"]


@pytest.mark.parametrize(
    "name, expected",
    [
        (
            "TimeoutError",
            'expected the dotted name of an exception class, such as "kopf.TemporaryError" '
            'or "builtins.TimeoutError"',
        ),
        ("no_such_http_client.Timeout", "cannot import 'no_such_http_client' (No module named 'no_such_http_client')"),
        ("kopf.NoSuchError", "'kopf' has no attribute 'NoSuchError'"),
        ("os.path", "os.path is not an exception class"),
        ("builtins.KeyboardInterrupt", "builtins.KeyboardInterrupt is not an exception class"),
        (
            "kopf_outcomes.Pending",
            "kopf_outcomes.Pending is an outcome, not an error: an outcome that "
            "a handler returns or raises is its own decision, rules do not match it",
        ),
    ],
)
def test_exception_names_that_do_not_resolve(tmp_path: Path, name: str, expected: str) -> None:
    shown = f'"{name}"' if "." in name else name
    assert problems(f'exceptions."{name}" = {{}}\n', tmp_path) == [
        f", line 1: [exceptions] {shown}: {expected}"
    ]


def test_two_names_for_one_class_in_one_scope(tmp_path: Path) -> None:
    text = (
        'exceptions."kopf.TemporaryError" = {}\n'
        'exceptions."kopf._core.actions.execution.TemporaryError" = {}\n'
    )
    assert problems(text, tmp_path) == [
        ', line 2: [exceptions] "kopf._core.actions.execution.TemporaryError": names the same '
        "class as 'kopf.TemporaryError': keep one"
    ]


@pytest.mark.parametrize(
    "rule, key, why",
    [
        ('outcome = "success", level = "INFO"', "level", ""),
        ('outcome = "success", delay = 1', "delay", ""),
        (
            'outcome = "pending", level = "INFO"',
            "level",
            " (Pending is logged at INFO when it begins, DEBUG while unchanged)",
        ),
        ('outcome = "pending", backoff = { base = 1 }', "backoff", ""),
        ('outcome = "fatal", delay = 1', "delay", ""),
        ('outcome = "fatal", escalate = [{ after_tries = 1, level = "ERROR" }]', "escalate", ""),
    ],
)
def test_rule_fields_that_do_not_apply_to_the_outcome(
    tmp_path: Path, rule: str, key: str, why: str
) -> None:
    outcome = rule.split('"')[1]
    assert problems(f'exceptions."builtins.OSError" = {{ {rule} }}\n', tmp_path) == [
        f', line 1: [exceptions."builtins.OSError"] {key}: '
        f'does not apply to outcome "{outcome}"{why}'
    ]


def test_lines_are_found_in_arrays_of_tables_and_multiline_values(tmp_path: Path) -> None:
    text = """\
[[escalate]]
after_tries = 1
level = "ERROR"

[[escalate]]
after_tries = -2
level = "ERROR"

[handlers.fn]
depends_on = [
    "spec.size",
    "",
]
"""
    assert problems(text, tmp_path) == [
        ", line 6: [escalate[1]] after_tries: must be a whole number of at least 1, got -2",
        ", line 10: [handlers.fn] depends_on[1]: "
        "must be a field path such as \"spec.size\", got ''",
    ]


def test_python_policies_are_checked_too() -> None:
    policy = Policy(
        defaults=Scope(delay=-1, exceptions={"nope.Error": ExceptionRule()}),
        handlers={"fn": Scope(escalate=(Escalation(level=logging.ERROR),))},
    )
    with pytest.raises(PolicyError) as info:
        load_policy(policy)
    assert info.value.messages == [
        "<Policy object>: delay: must be a number of seconds from 0 to 31622400 (a year), got -1",
        '<Policy object>: [exceptions] "nope.Error": '
        "cannot import 'nope' (No module named 'nope')",
        "<Policy object>: [handlers.fn] escalate[0]: "
        "set exactly one of after_tries or after_seconds",
    ]
    with pytest.raises(PolicyError):
        PolicyPlugin(policy)


def test_policy_error_lists_every_message() -> None:
    with pytest.raises(PolicyError) as info:
        loads_policy("delay = -1\nremember = 2\n", source="p.toml")
    assert str(info.value) == (
        "invalid kopf-outcomes policy p.toml (2 problems):\n"
        "  p.toml, line 1: delay: must be a number of seconds from 0 to 31622400 (a year), got -1\n"
        "  p.toml, line 2: remember: expected true or false, got a number (2)"
    )


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.toml")), ids=lambda path: path.name)
def test_example_policies_are_valid(path: Path) -> None:
    load_policy(path)


def test_examples_exist() -> None:
    assert {"quiet-temporary-errors.toml", "retry-warning.toml", "pending.toml"} <= {
        path.name for path in EXAMPLES.glob("*.toml")
    }


# --- install(policy=...) ---------------------------------------------------------------------


@pytest.fixture
def uninstalled() -> Iterator[None]:
    """A process without the patch, left so (tests/conftest.py fails a test that leaves one)."""
    assert not kopf_outcomes.is_installed(), "an earlier test left kopf-outcomes installed"
    yield
    kopf_outcomes.uninstall()


@pytest.mark.usefixtures("uninstalled")
def test_install_registers_the_policy_plugin(tmp_path: Path) -> None:
    path = write(tmp_path, 'exceptions."builtins.TimeoutError" = { outcome = "pending" }\n')
    plugins = kopf_outcomes.install(policy=path, entry_points=False)
    plugin = plugins.get_plugin(POLICY_PLUGIN_NAME)
    assert isinstance(plugin, PolicyPlugin)
    assert plugin.policy.defaults.exceptions["builtins.TimeoutError"].outcome == "pending"


@pytest.mark.usefixtures("uninstalled")
def test_install_refuses_an_invalid_policy(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="line 1: delay"):
        kopf_outcomes.install(policy=write(tmp_path, "delay = -1\n"), entry_points=False)


@pytest.mark.usefixtures("uninstalled")
def test_install_reads_the_policy_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KOPF_OUTCOMES_POLICY", str(write(tmp_path, "remember = true\n")))
    plugins = kopf_outcomes.install(entry_points=False)
    assert plugins.options("any", None).remember is True


@pytest.mark.usefixtures("uninstalled")
def test_install_takes_a_python_policy() -> None:
    policy = Policy(
        defaults=Scope(exceptions={"builtins.TimeoutError": ExceptionRule(outcome="pending")})
    )
    plugins = kopf_outcomes.install(policy=policy, entry_points=False)
    plugin = plugins.get_plugin(POLICY_PLUGIN_NAME)
    assert isinstance(plugin, PolicyPlugin) and plugin.policy is policy


# --- the policy reference ----------------------------------------------------------------------

DOCS = Path(__file__).parents[2] / "docs" / "policies.md"


def toml_blocks() -> list[str]:
    return re.findall(r"```toml\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.DOTALL)


def test_the_981_one_liner_is_in_the_docs_and_is_one_line() -> None:
    one_line = 'exceptions."kopf.TemporaryError" = { level = "INFO" }\n'
    assert one_line in toml_blocks()
    assert loads_policy(one_line) == Policy(
        defaults=Scope(exceptions={"kopf.TemporaryError": ExceptionRule(level=logging.INFO)})
    )


def test_every_toml_example_in_the_docs_loads_except_the_invalid_one() -> None:
    blocks = toml_blocks()
    assert len(blocks) >= 7
    for block in blocks:
        if "remeber" in block:  # the example of validation messages
            with pytest.raises(PolicyError):
                loads_policy(block)
        else:
            loads_policy(block, pyproject=block.startswith("[tool.kopf-outcomes]"))


def test_escalation_messages_name_each_steps_own_index(tmp_path: Path) -> None:
    text = 'escalate = [{after_tries = 2.5, level = "ERROR"}, {after_tries = 3}]\n'
    assert problems(text, tmp_path) == [
        ", line 1: [escalate[0]] after_tries: expected a whole number, got a number (2.5)",
        ', line 1: escalate[1]: set level, or outcome = "fatal", or both',
    ]


def test_an_integer_of_thousands_of_digits_is_a_located_problem_not_a_traceback(tmp_path: Path) -> None:
    assert problems(f"delay = 5\nescalate = [{{after_tries = {'9' * 5000}, level = \"ERROR\"}}]\n",
                    tmp_path) == [", line 2: a number too long to read (over 4,300 digits)"]
    assert problems(f"escalate = [{{after_tries = {'9' * 400}, level = \"ERROR\"}}]\n", tmp_path) == [
        ", line 1: [escalate[0]] after_tries: expected a whole number up to 1000000000, got a number "
        "(a number too large to show)"]


def test_other_objects_are_refused_in_a_policy_with_where_to_declare_them(tmp_path):
    text = '[handlers.delete_fn]\ndepends_on_objects = ["v1/configmaps"]\n'
    [problem] = problems(text, tmp_path)
    assert problem.startswith(", line 2: [handlers.delete_fn] depends_on_objects: unknown key 'depends_on_objects'"
                              " (other objects are declared in code, with @kopf_outcomes.depends_on_objects")
