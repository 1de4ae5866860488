"""
The public types catch mistakes: ``mypy --strict`` and pyright (strict) run once each over the
cases in ``cases/`` (good and bad operator code, good and bad plugins) and report exactly these
lines, and nothing in the good files. The typed hook markers also work at run time, with pluggy.

pyright comes from npm (its PyPI wrapper downloads Node at run time): installed once, pinned, into
the project's cache (``~/.cache/kopf-outcomes/pyright-<version>``); no npm is a failure, not a skip.
"""
from __future__ import annotations

import importlib.util
import inspect
import json
import shutil
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from kopf_outcomes import Pending, hooks, hookspecs
from kopf_outcomes.manager import PluginManager
from kopf_outcomes_testing.cluster.paths import cache_root
from tests.docs import test_hooks_pages
from tests.unit.test_engine import make_run

CASES = Path(__file__).parent / "cases"
PYRIGHT_VERSION = "1.1.414"

MYPY = [
    'bad_plugin.py:7: error: Argument 1 to "__call__" of "Hook" has incompatible type "Callable[[HandlerRun, '
    'Exception], Outcome | None]"; expected "ClassifyExceptionHook"  [arg-type]',
    'bad_plugin.py:7: note: "ClassifyExceptionHook.__call__" has type "def __call__(self, run: HandlerRun, '
    'exception: Exception) -> Outcome | None"',
    'bad_plugin.py:12: error: Argument 1 to "__call__" of "Hook" has incompatible type "Callable[[HandlerRun, str], '
    'Outcome | None]"; expected "ClassifyResultHook"  [arg-type]',
    'bad_plugin.py:12: note: "ClassifyResultHook.__call__" has type "def __call__(self, run: HandlerRun, '
    'result: object) -> Outcome | None"',
    'bad_plugin.py:17: error: Argument 1 to "__call__" of "Hook" has incompatible type "Callable[[HandlerRun, '
    'Decision], Coroutine[Any, Any, None]]"; expected "AdjustOutcomeHook"  [arg-type]',
    'bad_plugin.py:17: note: "AdjustOutcomeHook.__call__" has type "def __call__(self, run: HandlerRun, '
    'decision: Decision) -> None"',
    'bad_plugin.py:22: error: Argument 1 to "__call__" of "Hook" has incompatible type "Callable[[HandlerRun, '
    'object], str | None]"; expected "ClassifyResultHook"  [arg-type]',
    'bad_plugin.py:22: note: "ClassifyResultHook.__call__" has type "def __call__(self, run: HandlerRun, '
    'result: object) -> Outcome | None"',
    'bad_plugin.py:28: error: Argument "recheck" to "Pending" has incompatible type "str"; expected "float | None"'
    '  [arg-type]',
    'bad_user.py:9: error: "ObjectRef" has no attribute "nmae"  [attr-defined]',
    'bad_user.py:13: error: Argument "level" to "Retry" has incompatible type "Literal[\'LOUD\']"; expected '
    '"int | Literal[\'DEBUG\', \'INFO\', \'WARNING\', \'ERROR\', \'CRITICAL\']"  [arg-type]',
    'bad_user.py:14: error: Argument "on_delete" to "Fatal" has incompatible type "Literal[\'keep\']"; expected '
    '"Literal[\'release\', \'retain\'] | None"  [arg-type]',
    'bad_user.py:19: error: TypedDict "MemoryRecord" has no key "record"  [typeddict-item]',
]

# (file, line, rule, the message's first line): the rest of each message explains it.
PYRIGHT = [
    ("bad_plugin.py", 7, "reportArgumentType", 'Argument of type "(run: HandlerRun, exc: Exception) -> '
     '(Outcome | None)" cannot be assigned to parameter "function" of type "ClassifyExceptionHook" in function '
     '"__call__"'),
    ("bad_plugin.py", 12, "reportArgumentType", 'Argument of type "(run: HandlerRun, result: str) -> '
     '(Outcome | None)" cannot be assigned to parameter "function" of type "ClassifyResultHook" in function '
     '"__call__"'),
    ("bad_plugin.py", 17, "reportArgumentType", 'Argument of type "(run: HandlerRun, decision: Decision) -> '
     'CoroutineType[Any, Any, None]" cannot be assigned to parameter "function" of type "AdjustOutcomeHook" in '
     'function "__call__"'),
    ("bad_plugin.py", 22, "reportArgumentType", 'Argument of type "(run: HandlerRun, result: object) -> '
     '(str | None)" cannot be assigned to parameter "function" of type "ClassifyResultHook" in function '
     '"__call__"'),
    ("bad_plugin.py", 28, "reportArgumentType", 'Argument of type "Literal[\'10s\']" cannot be assigned to '
     'parameter "recheck" of type "float | None" in function "__init__"'),
    ("bad_user.py", 9, "reportUnknownMemberType", 'Type of "nmae" is unknown'),
    ("bad_user.py", 9, "reportAttributeAccessIssue", 'Cannot access attribute "nmae" for class "ObjectRef"'),
    ("bad_user.py", 13, "reportReturnType", 'Type "list[Retry | Fatal]" is not assignable to return type '
     '"list[Outcome]"'),
    ("bad_user.py", 13, "reportArgumentType", 'Argument of type "Literal[\'LOUD\']" cannot be assigned to '
     'parameter "level" of type "LevelName | int" in function "__init__"'),
    ("bad_user.py", 14, "reportArgumentType", 'Argument of type "Literal[\'keep\']" cannot be assigned to '
     'parameter "on_delete" of type "FatalOnDelete | None" in function "__init__"'),
    ("bad_user.py", 19, "reportGeneralTypeIssues", "Could not access item in TypedDict"),
    ("bad_user.py", 19, "reportUnknownVariableType", 'Return type, "Unknown | Literal[\'\']", is partially unknown'),
]


def test_mypy_strict_reports_exactly_the_mistakes() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--hide-error-context",
         "--cache-dir", str(cache_root() / "mypy-typing-cases"), "."],
        cwd=CASES, capture_output=True, text=True, timeout=300)
    assert done.stderr == ""
    assert sorted(done.stdout.splitlines(), key=_by_place) == MYPY


def _by_place(line: str) -> tuple[str, int]:
    file, number, _ = line.split(":", 2)
    return file, int(number)


@pytest.fixture(scope="session")
def pyright() -> Path:
    """The pyright CLI from npm, installed once into the cache."""
    prefix = cache_root() / f"pyright-{PYRIGHT_VERSION}"
    executable = prefix / "node_modules" / ".bin" / "pyright"
    if not executable.exists():
        npm = shutil.which("npm")
        assert npm is not None, "npm is needed for pyright (Debian/Ubuntu: apt-get install npm)"
        subprocess.run([npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
                        f"pyright@{PYRIGHT_VERSION}"], check=True, capture_output=True, timeout=600)
    return executable


def test_pyright_strict_reports_exactly_the_mistakes(pyright: Path) -> None:
    done = subprocess.run([str(pyright), "--pythonpath", sys.executable, "--outputjson", "."],
                          cwd=CASES, capture_output=True, text=True, timeout=300)
    report = json.loads(done.stdout)
    found = [(Path(d["file"]).name, d["range"]["start"]["line"] + 1, d.get("rule"), d["message"].splitlines()[0])
             for d in report["generalDiagnostics"]]
    assert found == PYRIGHT
    assert report["summary"]["filesAnalyzed"] == 4


def test_the_typed_markers_register_with_pluggy_under_the_hooks_names() -> None:
    spec = importlib.util.spec_from_file_location("good_plugin", CASES / "good_plugin.py")
    assert spec is not None and spec.loader is not None
    good_plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(good_plugin)
    plugins = PluginManager()
    plugins.register(good_plugin, name="good")
    impls = {caller.name: [impl for impl in caller.get_hookimpls() if impl.plugin is good_plugin]
             for caller in plugins.get_hookcallers(good_plugin) or ()}
    assert {name: [impl.function.__name__ for impl in found] for name, found in impls.items()} == {
        "kopf_outcomes_classify_exception": ["busy_is_pending"],
        "kopf_outcomes_adjust_outcome": ["cap"],
        "kopf_outcomes_observe_outcome": ["count"],
        "kopf_outcomes_owned_fields": ["owned"],
    }
    assert impls["kopf_outcomes_adjust_outcome"][0].trylast
    assert plugins.classify_exception_by_plugins(run=make_run(), exception=TimeoutError("busy")) == Pending("busy")
    assert repr(hooks.classify_result) == "<typed hook marker kopf_outcomes_classify_result>"


@pytest.mark.parametrize("name", hooks.__all__)
def test_each_typed_marker_has_its_hooks_signature(name: str) -> None:
    marker = getattr(hooks, name)
    spec = getattr(hookspecs, marker.name)
    protocol = typing.get_args(marker.__orig_class__)[0]
    expected = inspect.signature(spec)
    typed = inspect.signature(protocol.__call__)
    assert list(typed.parameters.values())[1:] == list(expected.parameters.values())  # names, kinds, types
    assert typed.return_annotation == expected.return_annotation
    assert {getattr(hooks, n).name for n in hooks.__all__} == set(test_hooks_pages.specs())
