"""Fakes of kube-apiserver, etcd and go, for testing our own error handling in isolation.

These tests never touch the shared cluster: the cache and the state folder are temporary.
"""
from __future__ import annotations

import stat
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

FAKE_ETCD_HEALTHY = """
import http.server, os, sys, urllib.parse
open(os.path.join(os.environ["FAKE_RECORDS"], "etcd.pid"), "w").write(str(os.getpid()))
url = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--listen-client-urls="))
port = urllib.parse.urlparse(url).port

class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b'{"health":"true"}')

http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
"""

FAKE_ETCD_PORT_RACE = """
import os
with open(os.path.join(os.environ["FAKE_RECORDS"], "etcd.attempts"), "a") as f:
    f.write("attempt\\n")
print("listen tcp 127.0.0.1:2379: bind: address already in use")
raise SystemExit(1)
"""

FAKE_APISERVER_FAILING = """
print("E1202 12:00:00.000000 run.go:72] error: fake apiserver refuses to start")
raise SystemExit(1)
"""

FAKE_APISERVER_HANGING = """
import os, time
open(os.path.join(os.environ["FAKE_RECORDS"], "kube-apiserver.pid"), "w").write(str(os.getpid()))
time.sleep(600)
"""

FAKE_GO_FAILING_BUILD = """
import json, os, sys
records = os.environ["FAKE_RECORDS"]
if sys.argv[1:3] == ["mod", "download"]:
    gomod = os.path.join(records, "upstream.mod")
    with open(gomod, "w") as f:
        f.write("module k8s.io/kubernetes\\n\\ngo 1.24.0\\n\\n"
                "replace k8s.io/api => ./staging/src/k8s.io/api\\n")
    print(json.dumps({"Path": "k8s.io/kubernetes", "GoMod": gomod}))
elif sys.argv[1] == "build":
    print("go: downloading k8s.io/api v0.34.4", file=sys.stderr)
    print("cmd/kube-apiserver/app/server.go:42:2: undefined: fakeSymbol", file=sys.stderr)
    raise SystemExit(2)
"""


FAKES = {
    "etcd-healthy": FAKE_ETCD_HEALTHY,
    "etcd-port-race": FAKE_ETCD_PORT_RACE,
    "apiserver-failing": FAKE_APISERVER_FAILING,
    "apiserver-hanging": FAKE_APISERVER_HANGING,
}


def write_script(path: Path, body: str) -> Path:
    """An executable Python script (a fake of a real binary)."""
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture
def records(tmp_path: Path) -> Path:
    """Where fakes write their pids and attempt counts."""
    folder = tmp_path / "records"
    folder.mkdir()
    return folder


@pytest.fixture
def isolated(tmp_path: Path, records: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private cache and state folder, no KUBEBUILDER_ASSETS; returns the state folder."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("KOPF_OUTCOMES_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("FAKE_RECORDS", str(records))
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    return tmp_path / "state"


@pytest.fixture
def fake_assets(tmp_path: Path, isolated: Path,
                monkeypatch: pytest.MonkeyPatch) -> Callable[[str, str], Path]:
    """Make a KUBEBUILDER_ASSETS folder with the named fakes (see FAKES) of both servers."""
    def make(etcd: str, apiserver: str) -> Path:
        folder = tmp_path / "assets"
        folder.mkdir(exist_ok=True)
        write_script(folder / "etcd", FAKES[etcd])
        write_script(folder / "kube-apiserver", FAKES[apiserver])
        monkeypatch.setenv("KUBEBUILDER_ASSETS", str(folder))
        return folder
    return make


@pytest.fixture
def failing_go(tmp_path: Path, isolated: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PATH with only a fake `go` whose `go build` fails like a compile error."""
    folder = tmp_path / "gobin"
    folder.mkdir()
    write_script(folder / "go", FAKE_GO_FAILING_BUILD)
    monkeypatch.setenv("PATH", str(folder))
    return folder
