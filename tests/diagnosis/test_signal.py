"""``kopf-outcomes signal``'s own logic: what it sends, and that it needs no extra (issue 44)."""
from __future__ import annotations

import subprocess
import sys
from typing import Any

import kopf
import pytest
from click.testing import CliRunner

from kopf_outcomes import client
from kopf_outcomes.diagnosis import signal as signal_module
from kopf_outcomes.diagnosis.kube import Client, Kind, KubeError

KEX = Kind("kopf.dev", "v1", "kopfexamples", "KopfExample", namespaced=True)


class Recording(Client):
    """An API server that records the patches; ``status_subresource``: whether the kind has one."""

    def __init__(self, status_subresource: bool = True) -> None:
        super().__init__(kopf.ConnectionInfo(server="http://fake", default_namespace="ns"))
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.status_subresource = status_subresource

    def resolve(self, text: str, discovery: object = None) -> Kind:
        return KEX

    def get(self, path: str, accept: str | None = None, **query: str) -> dict[str, Any]:
        return {"metadata": {"name": path.rsplit("/", 1)[1]}}

    def merge_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        if path.endswith("/status") and not self.status_subresource:
            raise KubeError(f"PATCH {path}: 404 the server could not find the requested resource", 404)
        self.patches.append((path, patch))
        return {}


def run(fake: Recording, monkeypatch: pytest.MonkeyPatch, *args: str) -> Any:
    monkeypatch.setattr(signal_module.Client, "from_kubeconfig", classmethod(lambda cls: fake))
    return CliRunner().invoke(signal_module.signal, list(args))


def test_status_goes_through_the_subresource_and_annotations_to_the_object(monkeypatch):
    fake = Recording()
    result = run(fake, monkeypatch, "kex/moved", "-n", "team", "--status", "deletion.state=done",
                 "--status", "deletion.attempts:=3", "--annotate", "example.com/callback=done",
                 "--annotate", "example.com/old-")
    assert result.exit_code == 0, result.output
    assert fake.patches == [
        ("/apis/kopf.dev/v1/namespaces/team/kopfexamples/moved",
         {"metadata": {"annotations": {"example.com/callback": "done", "example.com/old": None}}}),
        ("/apis/kopf.dev/v1/namespaces/team/kopfexamples/moved/status",
         {"status": {"deletion": {"state": "done", "attempts": 3}}}),
    ]
    assert result.output.strip() == ("kopfexamples.kopf.dev/moved signalled: status.deletion.state, "
                                     "status.deletion.attempts, annotation example.com/callback, "
                                     "annotation example.com/old")


def test_the_same_patches_as_client_signal():
    assert client.patches({"a": "b"}, {"deletion": {"state": "done"}}) == \
        ({"metadata": {"annotations": {"a": "b"}}}, {"status": {"deletion": {"state": "done"}}})
    with pytest.raises(ValueError, match="needs annotations or status"):
        client.patches(None, {})


def test_a_kind_without_a_status_subresource_takes_the_status_in_the_object(monkeypatch):
    fake = Recording(status_subresource=False)
    result = run(fake, monkeypatch, "kex/x", "--status", "deletion.state=done")
    assert result.exit_code == 0, result.output
    assert fake.patches == [("/apis/kopf.dev/v1/namespaces/ns/kopfexamples/x",
                             {"status": {"deletion": {"state": "done"}}})]


@pytest.mark.parametrize("args, error", [
    (["kex/x"], "a signal needs annotations or status to change"),
    (["x", "--status", "a=b"], "expected KIND/NAME"),
    (["kex/x", "--status", "nothing"], "expected KEY=VALUE, KEY:=JSON or KEY-"),
    (["kex/x", "--status", "a:={no"], "the value after := is not JSON"),
    (["kex/x", "--status", "a=1", "--status", "a.b=2"], "is inside another value"),
    (["kex/x", "--status", "a=1", "--status", "a=2"], "is set twice"),
    (["kex/x", "--status", "=1"], "no key before the value"),
])
def test_wrong_input_is_named(monkeypatch, args, error):
    fake = Recording()
    result = run(fake, monkeypatch, *args)
    assert result.exit_code == 2 and error in result.output, result.output
    assert fake.patches == []


def test_the_command_needs_no_kubernetes_asyncio():
    """The client extra may be absent: the console script, and signal, import without it."""
    code = ("import sys; sys.modules['kubernetes_asyncio'] = None\n"
            "from kopf_outcomes.cli import main\n"
            "from click.testing import CliRunner\n"
            "result = CliRunner().invoke(main, ['signal', '--help'])\n"
            "assert result.exit_code == 0, result.output\n"
            "assert 'kubernetes_asyncio' not in {m for m in sys.modules if sys.modules[m] is not None}\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
