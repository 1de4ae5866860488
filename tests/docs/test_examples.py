"""
Every code example of the documentation (the docs/ pages, README.md, CHANGELOG.md) is checked:
Python blocks compile and pass mypy --strict together; TOML blocks load as policies, or, for
packaging snippets, name entry points of the kopf_outcomes group. A TOML block followed by the
console output of an invalid policy must be refused with exactly the messages shown.
Longer examples are files of their own (literalinclude), tested as code.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from kopf_outcomes.policy import PolicyError, loads_policy
from tests.docs.blocks import Block, all_blocks, following

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PYTHON = all_blocks("python")
TOML = all_blocks("toml")


def test_the_docs_have_examples_to_check() -> None:
    assert len(PYTHON) >= 10 and len(TOML) >= 10


@pytest.mark.parametrize("block", PYTHON, ids=[b.where for b in PYTHON])
def test_python_block_compiles(block: Block) -> None:
    compile(block.code, block.where, "exec")


def test_python_blocks_pass_mypy_strict(tmp_path: Path) -> None:
    api = pytest.importorskip("mypy.api", reason="mypy is in the dev extra and in `tox -e docs`")
    files: dict[str, Block] = {}
    for index, block in enumerate(PYTHON):
        name = f"doc_block_{index}.py"
        (tmp_path / name).write_text(block.code, encoding="utf-8")
        files[name] = block
    stdout, stderr, status = api.run([
        "--strict", "--no-incremental", "--cache-dir", str(tmp_path / ".mypy_cache"),
        "--python-version", "3.10", "--ignore-missing-imports", "--show-error-codes",
        *(str(tmp_path / name) for name in files),
    ])
    problems = []
    for line in stdout.splitlines():
        found = re.match(r"^(?:.*/)?(doc_block_\d+\.py):(\d+): (.*)$", line)
        if found:
            block = files[found[1]]
            problems.append(f"{block.path.name}:{block.line + int(found[2]) - 1}: {found[3]}")
    assert status == 0 and not problems, "\n".join(problems) or stdout + stderr


def shown_refused(block: Block) -> bool:
    console = following(block)
    return console is not None and console.language == "console" and "invalid policy" in console.code


def test_the_refused_policy_example_is_recognised() -> None:
    assert sum(1 for block in TOML if shown_refused(block)) == 1


@pytest.mark.parametrize("block", TOML, ids=[b.where for b in TOML])
def test_toml_block_is_a_valid_policy_or_entry_point(block: Block) -> None:
    document = tomllib.loads(block.code)
    if "project" in document:
        entry_points = document["project"]["entry-points"]["kopf_outcomes"]
        assert entry_points and all(re.fullmatch(r"[\w.]+(:[\w.]+)?", v) for v in entry_points.values())
    elif shown_refused(block):
        with pytest.raises(PolicyError) as error:
            loads_policy(block.code, source="policy.toml")
        console = following(block)
        assert console is not None
        shown = [line for line in console.code.splitlines() if line.startswith("policy.toml, line")]
        assert shown == error.value.messages
    else:
        loads_policy(block.code, source=block.where, pyproject="tool" in document)
