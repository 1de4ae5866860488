"""The console commands: check-policy (the contract), explain, plugins."""

from __future__ import annotations

import logging
import sys
import types
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kopf_outcomes import hookimpl
from kopf_outcomes.cli import main
from kopf_outcomes.plugins_cli import plugins
from kopf_outcomes.policy import cli as policy_cli
from kopf_outcomes.policy.cli import APPLIES_TO, IMPORT_HINT, check_policy, explain

POLICY = """\
exceptions."kopf.TemporaryError" = { level = "INFO" }
escalate = [{ after_tries = 5, level = "ERROR" }]

[handlers.delete_fn]
explicit_completion = true
fatal_on_delete = "retain"
depends_on = ["status.deletion"]

[handlers.delete_fn.exceptions."builtins.TimeoutError"]
outcome = "pending"

[resources."kopfexamples.kopf.dev"]
levels = { retry = "WARNING" }
"""


INSTALLED_POSTING = policy_cli.default_posting


@pytest.fixture(autouse=True)
def posting_of_kopf_before_1_44(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Events explain names are those of Kopf's default posting settings: pinned here to a Kopf
    that posts log lines by default (before 1.44), whichever Kopf runs the tests, except where a
    test puts the installed one's back."""
    monkeypatch.setattr(policy_cli, "default_posting",
                        lambda: types.SimpleNamespace(enabled=True, level=logging.INFO, loggers=True))


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(POLICY, encoding="utf-8")
    return path


def invoke(command: Any, *args: object) -> Any:
    return CliRunner().invoke(command, [str(arg) for arg in args], catch_exceptions=False)


# --- check-policy ----------------------------------------------------------------------------


OPERATOR_FILE = "class ExternalSystemBusy(Exception):\n    pass\n"
OPERATOR_POLICY = 'exceptions."myop.ExternalSystemBusy" = { outcome = "pending" }\n'


@pytest.fixture
def operator_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The operator's folder, current: its own myop.py and a policy naming an exception of it."""
    (tmp_path / "myop.py").write_text(OPERATOR_FILE, encoding="utf-8")
    (tmp_path / "policy.toml").write_text(OPERATOR_POLICY, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "myop", raising=False)
    yield tmp_path
    sys.modules.pop("myop", None)


def test_check_policy_and_explain_import_from_the_current_folder_as_kopf_run_does(operator_folder: Path) -> None:
    """Issue 44, finding 13: an exception class of the operator's own myop.py, in the current folder."""
    path_before = list(sys.path)
    result = invoke(check_policy, "policy.toml")
    assert result.exit_code == 0, result.output
    result = invoke(explain, "--policy", "policy.toml", "--handler", "delete_fn",
                    "--exception", "myop.ExternalSystemBusy")
    assert result.exit_code == 0, result.output
    assert "outcome:     pending" in result.output, result.output
    assert sys.path == path_before  # the folder is on the path while importing, not after


def test_a_module_not_found_is_named_with_where_it_was_looked_for(operator_folder: Path) -> None:
    (operator_folder / "policy.toml").write_text('exceptions."nosuchop.Busy" = { outcome = "pending" }\n')
    result = CliRunner().invoke(check_policy, ["policy.toml"])
    assert result.exit_code == 1
    assert "cannot import 'nosuchop'" in result.output
    assert f"hint: exception classes are imported with the current folder ({operator_folder}) first" in result.output
    result = CliRunner().invoke(explain, ["--policy", "policy.toml", "--handler", "h", "--exception", "nosuchop.Busy"])
    assert result.exit_code == 2 and "PYTHONPATH" in result.output, result.output



def test_check_policy_valid(policy: Path) -> None:
    result = invoke(check_policy, policy)
    assert result.exit_code == 0
    assert result.stdout == (
        f"{policy}: valid policy: 1 handler scope(s), 1 resource scope(s), 2 exception rule(s)\n"
        f"{APPLIES_TO}\n"
    )


def test_check_policy_empty_file_is_valid(tmp_path: Path) -> None:
    (tmp_path / "empty.toml").write_text("")
    result = invoke(check_policy, tmp_path / "empty.toml")
    assert result.exit_code == 0, result.output


def test_check_policy_lists_every_problem_located(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(
        'delay = -1\n[handlers.fn]\nremember = "yes"\n'
        'exceptions."nope.Error" = { outcome = "later" }\n'
    )
    result = invoke(check_policy, path)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"{path}, line 1: delay: must be a number of seconds from 0 to 31622400 (a year), got -1",
        f'{path}, line 3: [handlers.fn] remember: expected true or false, got a string ("yes")',
        f'{path}, line 4: [handlers.fn.exceptions."nope.Error"] outcome: expected one of '
        f'"success", "pending", "retry", "fatal", got a string ("later")',
        f"{path}, line 4: [handlers.fn.exceptions] \"nope.Error\": cannot import 'nope' "
        f"(No module named 'nope')",
        f"{path}: invalid policy, 4 problems; an operator refuses to start with it",
        IMPORT_HINT.format(folder=Path.cwd()),
    ]


def test_check_policy_syntax_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text("delay = 5\n[handlers.fn\n")
    result = invoke(check_policy, path)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"{path}, line 2: TOML syntax error: ")


def test_check_policy_missing_file(tmp_path: Path) -> None:
    # A usage error (exit 2) that says the file is missing; not "invalid policy, 1 problem".
    result = invoke(check_policy, tmp_path / "missing.toml")
    assert result.exit_code == 2
    assert "missing.toml' does not exist" in result.stderr
    assert "invalid policy" not in result.stderr


def test_check_policy_pyproject(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text('[project]\nname = "x"\n[tool.kopf-outcomes]\nremember = true\n')
    assert invoke(check_policy, path).exit_code == 0


def test_check_policy_and_explain_say_which_kinds_the_rules_apply_to(policy: Path) -> None:
    expected = ("applies to:  change, sub-handler, timer, daemon, activity, webhook handlers; not to login, event,"
                " index handlers (@kopf.on.login, @kopf.on.event, @kopf.index: stock Kopf, no policy or plugin)")
    assert expected == APPLIES_TO
    assert expected in invoke(check_policy, policy).stdout.splitlines()
    explained = invoke(explain, "--policy", policy, "--handler", "create_fn", "--result", "true")
    assert expected in explained.stdout.splitlines()


def test_commands_are_registered_on_the_console_script(policy: Path) -> None:
    assert {"check-policy", "explain", "plugins"} <= set(main.commands)
    result = invoke(main, "check-policy", policy)
    assert result.exit_code == 0


# --- explain ---------------------------------------------------------------------------------


def test_explain_the_981_rule(policy: Path) -> None:
    result = invoke(
        explain,
        "--policy",
        policy,
        "--handler",
        "create_fn",
        "--exception",
        "kopf.TemporaryError",
        "--message",
        "not yet",
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert 'decided by:  exceptions."kopf.TemporaryError"' in lines
    assert "outcome:     retry in 60s: 'not yet'; logged at INFO: a Normal Event" in lines


def test_explain_says_no_event_is_posted_where_kopfs_defaults_post_no_log_line(
        policy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 44, finding 10: explain said "logged at INFO: a Normal Event" where Kopf's default
    posting settings post no Event (Kopf >= 1.44: ``settings.posting.loggers`` is off by default;
    it came in 1.41, on)."""
    import kopf
    from packaging.version import Version
    monkeypatch.setattr(policy_cli, "default_posting", INSTALLED_POSTING)
    result = invoke(explain, "--policy", policy, "--handler", "create_fn", "--exception", "kopf.TemporaryError",
                    "--message", "not yet")
    assert result.exit_code == 0, result.output
    if Version(metadata.version("kopf")) >= Version("1.44"):
        expected = ("outcome:     retry in 60s: 'not yet'; logged at INFO: no Event by Kopf's default settings "
                    "(a Normal Event with settings.posting.loggers = True)")
    else:
        expected = "outcome:     retry in 60s: 'not yet'; logged at INFO: a Normal Event"
    assert expected in result.stdout.splitlines(), (kopf.__file__, result.stdout)


def test_explain_handler_rule_over_the_top_level(policy: Path) -> None:
    result = invoke(
        explain,
        "--policy",
        policy,
        "--handler",
        "delete_fn",
        "--resource",
        "kopfexamples.v1.kopf.dev",
        "--exception",
        "builtins.TimeoutError",
    )
    lines = result.stdout.splitlines()
    assert 'decided by:  handlers.delete_fn.exceptions."builtins.TimeoutError"' in lines
    assert 'option:      fatal_on_delete = "retain" (handlers.delete_fn.fatal_on_delete)' in lines
    assert any(line.startswith("outcome:     pending: 'TimeoutError()', parked") for line in lines)


def test_explain_stock_reading_with_scope_levels_and_escalation(policy: Path) -> None:
    args = [
        "--policy",
        policy,
        "--handler",
        "create_fn",
        "--resource",
        "kopfexamples.v1.kopf.dev",
        "--exception",
        "builtins.ValueError",
        "--message",
        "boom",
    ]
    lines = invoke(explain, *args).stdout.splitlines()
    assert "decided by:  no policy rule: stock Kopf reading" in lines
    assert 'setting:     resources."kopfexamples.kopf.dev".levels.retry = "WARNING"' in lines
    assert "escalation:  escalate[0] after 5 tries: level ERROR (not reached)" in lines
    assert "outcome:     retry in 60s: 'boom'; logged at WARNING: a Warning Event" in lines

    lines = invoke(explain, *args, "--retry", "5").stdout.splitlines()
    assert "escalation:  escalate[0] after 5 tries: level ERROR (reached)" in lines
    assert "outcome:     retry in 60s: 'boom'; logged at ERROR: an Error Event" in lines


def test_explain_shows_the_rule_and_which_scope_settings_it_overrides(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(
        'delay = 30\nlevels = { retry = "ERROR" }\n'
        '[exceptions."builtins.TimeoutError"]\n'
        'outcome = "retry"\nbackoff = { base = 10, cap = 300 }\n'
    )
    result = invoke(
        explain, "--policy", path, "--handler", "fn", "--exception", "builtins.TimeoutError"
    )
    assert result.stdout.splitlines()[4:] == [
        'rule:        outcome = "retry", '
        "backoff = { base = 10, factor = 2, cap = 300, jitter = 0 }",
        'setting:     levels.retry = "ERROR"',
        "setting:     delay = 30 (the rule's own value applies)",
        "outcome:     retry in 10s: 'TimeoutError()'; logged at ERROR: an Error Event",
    ]


@pytest.mark.parametrize(
    "handler, deleting, expected",
    [
        ("delete_fn", True, "fatal: 'no' (retain the finalizer); logged at ERROR: an Error Event"),
        (
            "create_fn",
            True,
            "fatal: 'no' (release the finalizer); logged at ERROR: an Error Event "
            "— stock Kopf runs it unchanged",
        ),
        (
            "delete_fn",
            False,
            "fatal: 'no'; logged at ERROR: an Error Event — stock Kopf runs it unchanged",
        ),
    ],
)
def test_explain_fatal_on_delete(policy: Path, handler: str, deleting: bool, expected: str) -> None:
    args = ["--deleting"] if deleting else []
    result = invoke(
        explain,
        "--policy",
        policy,
        "--handler",
        handler,
        *args,
        "--exception",
        "kopf.PermanentError",
        "--message",
        "no",
    )
    assert f"outcome:     {expected}" in result.stdout.splitlines()


def test_explain_stock_kopf_unchanged(policy: Path) -> None:
    result = invoke(
        explain,
        "--policy",
        policy,
        "--handler",
        "create_fn",
        "--exception",
        "kopf.PermanentError",
        "--message",
        "no",
    )
    assert (
        "outcome:     fatal: 'no'; logged at ERROR: an Error Event — stock Kopf runs it unchanged"
    ) in result.stdout.splitlines()


@pytest.mark.parametrize(
    "value, handler, expected",
    [
        (
            "false",
            "delete_fn",
            "outcome:     pending: 'not complete yet', parked until its state changes; "
            "logged at INFO when it begins (a Normal Event), DEBUG while unchanged",
        ),
        ("true", "delete_fn", "outcome:     success (result None); logged at INFO: a Normal Event"),
        (
            '"text"',
            "create_fn",
            "outcome:     success (result 'text'); logged at INFO: a Normal Event "
            "— stock Kopf runs it unchanged",
        ),
        (
            "plain words",
            "create_fn",
            "outcome:     success (result 'plain words'); logged at INFO: "
            "a Normal Event — stock Kopf runs it unchanged",
        ),
    ],
)
def test_explain_results(policy: Path, value: str, handler: str, expected: str) -> None:
    result = invoke(explain, "--policy", policy, "--handler", handler, "--result", value)
    assert result.exit_code == 0, result.output
    assert expected in result.stdout.splitlines()


@pytest.mark.parametrize(
    "args, error",
    [
        ([], "give exactly one of --exception or --result"),
        (["--exception", "builtins.ValueError", "--result", "1"], "give exactly one of"),
        (["--exception", "nope.Error"], "cannot import 'nope'"),
        (["--result", "1", "--resource", "kopfexamples"], "expected plural.version.group"),
        (["--result", "1", "--kind", "KopfExample"], "--kind needs --resource"),
    ],
)
def test_explain_usage_errors(policy: Path, args: list[str], error: str) -> None:
    result = invoke(explain, "--policy", policy, "--handler", "fn", *args)
    assert result.exit_code == 2
    assert error in result.stderr


def test_explain_with_an_invalid_policy(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("delay = -1\n")
    result = invoke(explain, "--policy", path, "--handler", "fn", "--result", "1")
    assert result.exit_code == 1
    assert "line 1: delay" in result.stderr


# --- plugins ---------------------------------------------------------------------------------


class Audit:
    @hookimpl
    def kopf_outcomes_observe_outcome(self, run: object, outcome: object, patch: object) -> None:
        pass

    @hookimpl(tryfirst=True)
    def kopf_outcomes_classify_exception(self, run: object, exception: object) -> None:
        return None


class FakeEntryPoint:
    name = "audit"
    value = "audit_plugin:Audit"
    group = "kopf_outcomes"
    dist = None

    def load(self) -> object:
        return Audit()


@pytest.fixture
def entry_points(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake(group: str) -> list[object]:
        return [FakeEntryPoint()] if group == "kopf_outcomes" else []

    monkeypatch.setattr(metadata, "entry_points", fake)
    monkeypatch.delenv("KOPF_OUTCOMES_POLICY", raising=False)
    monkeypatch.delenv("KOPF_OUTCOMES_PLUGINS", raising=False)
    monkeypatch.delenv("KOPF_OUTCOMES_DISABLE_PLUGINS", raising=False)


@pytest.mark.usefixtures("entry_points")
def test_plugins_lists_plugins_hooks_and_call_order(policy: Path) -> None:
    result = invoke(plugins, "--policy", policy)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "Plugins, in the order of registration:",
        "  kopf_outcomes.builtin    built-in",
        "  audit                    entry point audit_plugin:Audit",
        f"  kopf_outcomes.policy     policy {policy}",
        "Hooks, each with its plugins in the order they are called:",
        "  kopf_outcomes_handler_options",
        "    kopf_outcomes.policy",
        "  kopf_outcomes_classify_result (firstresult: the first answer decides)",
        "    kopf_outcomes.builtin [trylast]",
        "  kopf_outcomes_classify_exception (firstresult: the first answer decides)",
        "    audit [tryfirst]",
        "    kopf_outcomes.policy",
        "    kopf_outcomes.builtin [trylast]",
        "  kopf_outcomes_adjust_outcome",
        "    kopf_outcomes.policy",
        "  kopf_outcomes_observe_outcome",
        "    audit",
        "  kopf_outcomes_observe_object",
        "    (none)",
        "  kopf_outcomes_object_gone",
        "    (none)",
        "  kopf_outcomes_owned_fields",
        "    (none)",
    ]


@pytest.mark.usefixtures("entry_points")
def test_plugins_shows_what_the_deny_list_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KOPF_OUTCOMES_DISABLE_PLUGINS", "audit")
    lines = invoke(plugins).stdout.splitlines()
    assert "  audit                    not loaded: excluded by the allow/deny lists" in lines
    assert "    audit [tryfirst]" not in lines


@pytest.mark.usefixtures("entry_points")
def test_plugins_takes_the_policy_from_the_environment(
    policy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KOPF_OUTCOMES_POLICY", str(policy))
    assert f"  kopf_outcomes.policy     policy {policy}" in invoke(plugins).stdout.splitlines()


@pytest.mark.usefixtures("entry_points")
def test_plugins_refuses_an_invalid_policy(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text("remember = 1\n")
    result = invoke(plugins, "--policy", tmp_path / "bad.toml")
    assert result.exit_code == 1
    assert "line 1: remember" in result.stderr


def test_check_policy_without_import_imports_no_module_the_policy_names(tmp_path: Path) -> None:
    module = "kopf_outcomes_never_imported_here"
    (tmp_path / f"{module}.py").write_text("raise SystemExit('imported!')\n")
    policy = tmp_path / "p.toml"
    policy.write_text(f'exceptions."{module}.Boom" = {{ level = "INFO" }}\nexceptions."not a name" = {{}}\n')
    sys.path.insert(0, str(tmp_path))
    try:
        result = CliRunner().invoke(main, ["check-policy", "--no-import", str(policy)])
        assert module not in sys.modules
    finally:
        sys.path.remove(str(tmp_path))
    assert result.exit_code == 1
    assert "not a name" in result.output and "expected the dotted name of an exception class" in result.output
    assert "imported!" not in result.output
    policy.write_text(f'exceptions."{module}.Boom" = {{ level = "INFO" }}\n')
    assert CliRunner().invoke(main, ["check-policy", "--no-import", str(policy)]).exit_code == 0
