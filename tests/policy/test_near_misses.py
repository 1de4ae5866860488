"""Spellings TOML accepts and the policy does not: named as near misses, one problem each, saying
what to write instead."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from kopf_outcomes.policy import PolicyError, load_policy
from kopf_outcomes.policy.cli import check_policy


def test_a_pyproject_table_spelt_with_an_underscore_is_named(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text('[project]\nname = "op"\n\n[tool.kopf_outcomes]\ndelay = 5\n')
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    assert info.value.messages == [
        f"{path}: no [tool.kopf-outcomes] table: the policy of a pyproject.toml lives there; "
        f"found [tool.kopf_outcomes] (did you mean [tool.kopf-outcomes]?)"]


def test_a_pyproject_without_any_near_table_says_only_where_the_policy_lives(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text('[tool.ruff]\nline-length = 100\n')
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    assert info.value.messages == [
        f"{path}: no [tool.kopf-outcomes] table: the policy of a pyproject.toml lives there"]


def test_an_unquoted_dotted_exception_name_is_one_problem_that_says_to_quote_it(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text('[exceptions.kopf.TemporaryError]\noutcome = "pending"\n')
    result = CliRunner().invoke(check_policy, [str(path)])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"{path}, line 1: [exceptions] kopf: the exception name 'kopf.TemporaryError' was read as nested tables "
        f"(TOML splits a bare key at its dots): quote the key, as [exceptions.\"kopf.TemporaryError\"]",
        f"{path}: invalid policy, 1 problem; an operator refuses to start with it",
    ]


def test_a_split_name_in_a_handler_scope_names_that_scope_and_a_quoted_one_loads(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text('[handlers.delete_fn.exceptions.my.errors.Busy]\noutcome = "pending"\n'
                    '[exceptions."kopf.TemporaryError"]\noutcome = "pending"\n')
    with pytest.raises(PolicyError) as info:
        load_policy(path, import_names=False)
    assert info.value.messages == [
        f"{path}, line 1: [handlers.delete_fn.exceptions] my: the exception name 'my.errors.Busy' was read as "
        f"nested tables (TOML splits a bare key at its dots): quote the key, as "
        f"[handlers.delete_fn.exceptions.\"my.errors.Busy\"]"]
