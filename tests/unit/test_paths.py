"""One field path syntax (issue 29, item 7): keys with dots (label and annotation keys) can be
named in depends_on, ignore, the sources' fields and policies, escaped or as segments."""
from __future__ import annotations

from pathlib import Path

import pytest

import kopf_outcomes
from kopf_outcomes import paths
from kopf_outcomes.options import attached_options
from kopf_outcomes.policy.loading import load_policy
from tests.unit.conftest import digest

NAME = "app.kubernetes.io/name"
ESCAPED = r"metadata.labels.app\.kubernetes\.io/name"


def body(name: str) -> dict:
    return {"metadata": {"labels": {NAME: name, "app": "x"}}, "spec": {"size": 1}}


@pytest.mark.parametrize("path, segments", [
    ("spec.size", ("spec", "size")),
    (ESCAPED, ("metadata", "labels", NAME)),
    (["metadata", "labels", NAME], ("metadata", "labels", NAME)),
    (("spec",), ("spec",)),
    (r"a\\.b", ("a\\", "b")),  # an escaped backslash
])
def test_a_path_is_dotted_with_escaped_dots_or_a_list_of_segments(path, segments):
    assert paths.parse(path) == segments
    assert paths.parse(paths.dotted(segments)) == segments  # the canonical form reads back


@pytest.mark.parametrize("path", ["", "spec..size", "spec.", "spec\\", [], ["spec", ""], [1]])
def test_what_is_no_path_is_a_clear_error(path):
    with pytest.raises(ValueError, match="field path"):
        paths.parse(path)


def test_a_label_key_with_dots_can_be_a_handlers_whole_state():
    for given in (ESCAPED, ["metadata", "labels", NAME]):
        options = attached_options(kopf_outcomes.handler_options(depends_on=[given])(lambda: None))
        assert options is not None and options.depends_on == (ESCAPED,)  # one canonical form, stored and shown
        scope = options.depends_on
        assert digest(body("a"), depends_on=scope) != digest(body("b"), depends_on=scope)  # was: both None
        assert digest(body("a"), depends_on=scope) == digest({**body("a"), "spec": {"size": 2}}, depends_on=scope)


def test_a_label_key_with_dots_can_be_a_field_of_other_objects():
    source = kopf_outcomes.owned("v1", "pods", fields=[ESCAPED])
    pod = {"metadata": {"name": "p", "uid": "u", "ownerReferences": [{"uid": "o"}], "labels": {NAME: "db"}}}
    assert source.entries(pod)["o"].fields == ("db",)


def test_a_policy_names_keys_with_dots_escaped_or_as_segments(tmp_path: Path):
    file = tmp_path / "policy.toml"
    file.write_text('[handlers.fn]\ndepends_on = [\'metadata.labels.app\\.kubernetes\\.io/name\']\n'
                    'ignore = [["metadata", "annotations", "example.com/seen"]]\n')
    scope = load_policy(file).handlers["fn"]
    assert scope.depends_on == (ESCAPED,)
    assert scope.ignore == (r"metadata.annotations.example\.com/seen",)


def test_what_woke_a_handler_is_named_in_the_same_syntax():
    from kopf_outcomes.digest import parts, state

    before, after = parts(state(body("a"))), parts(state(body("b")))
    assert [path for path in after if before.get(path) != after[path]] == [ESCAPED]
    assert paths.parse(ESCAPED) == ("metadata", "labels", NAME)  # what why shows reads back


def test_options_made_anywhere_hold_checked_canonical_paths():
    from kopf_outcomes.options import HandlerOptions

    # A plugin's answer (kopf_outcomes_handler_options) makes HandlerOptions itself.
    assert HandlerOptions(depends_on=[["metadata", "labels", NAME]]).depends_on == (ESCAPED,)
    with pytest.raises(ValueError, match="ignore: 'spec..x' is not a field path"):
        HandlerOptions(ignore=("spec..x",))
    with pytest.raises(TypeError, match="not a single string"):
        kopf_outcomes.handler_options(ignore="status.phase")  # not ('s', 't', 'a', ...)
