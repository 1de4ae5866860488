"""
The sharding how-to's "Run it on your machine" (docs/howto/shard.md) runs as written on the local
control plane, and shows what it prints (issue 44): its ``sh local`` blocks are typed into three
bash shells (``terminal-N``), in the page's order, from the repository's folder with the
virtualenv's commands first on the PATH and no KUBECONFIG (the page sets it); each ``why`` output
is compared with the page's, times, ages and the operators' identities aside.

Two things differ from the page on purpose: the namespace (``shards-demo`` becomes the test's own,
so that runs do not collide), and ``KOPF_OUTCOMES_PLUGINS`` is empty, as for every e2e operator
(the test environment has fixture plugins installed, a broken one among them).
Set ``KOPF_OUTCOMES_RECORD=DIR`` to write the outputs there (to refresh the page).
"""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from kopf_outcomes_testing import ClusterInfo
from tests.docs.blocks import ROOT, Block, blocks, following

HOWTO = ROOT / "docs" / "howto" / "shard.md"
PAGE_NAMESPACE = "shards-demo"
_spec = importlib.util.spec_from_file_location("tutorial_replay", ROOT / "docs" / "tutorial" / "replay.py")
assert _spec is not None and _spec.loader is not None
replay = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(replay)


def local_blocks() -> list[Block]:
    return [b for b in blocks(HOWTO) if b.language == "sh" and "local" in b.flags]


def terminal_of(block: Block) -> str:
    [name] = [flag for flag in block.flags if flag.startswith("terminal-")]
    return name


def normalized(text: str, namespace: str = PAGE_NAMESPACE) -> list[str]:
    """The output without what differs from run to run: times, ages, identities, column widths."""
    text = text.replace(namespace, PAGE_NAMESPACE)
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|\+00:00)?", "TIME", text)
    text = re.sub(r"\(\d+[smhd]\d*[smh]?\)", "(AGE)", text)
    text = re.sub(r"peering (\S+): \S+@\S+ \(", r"peering \1: ID (", text)
    return [" ".join(line.split()) for line in text.strip().splitlines()]


def in_peering(cluster: ClusterInfo, namespace: str, name: str) -> bool:
    """Whether an operator keeps itself alive in the peering (it has started)."""
    done = subprocess.run(["kubectl", "--kubeconfig", str(cluster.admin_kubeconfig), "get", "kopfpeering", name,
                           "-n", namespace, "-o", "jsonpath={.status}"], capture_output=True, text=True, timeout=30)
    return done.returncode == 0 and "lastseen" in done.stdout


def test_the_howto_has_its_local_blocks() -> None:
    found = [(terminal_of(b), len(b.code.splitlines())) for b in local_blocks()]
    assert [name for name, _ in found] == ["terminal-1", "terminal-2", "terminal-3"] + ["terminal-1"] * 4
    whys = [b for b in local_blocks() if "kopf-outcomes why" in b.code]
    assert len(whys) == 2 and all((following(b) or b).language == "text" for b in whys)


def test_the_howto_runs_as_written_and_shows_what_it_prints(cluster: ClusterInfo, namespace: str,
                                                            tmp_path: Path) -> None:
    env = {"HOME": os.environ["HOME"], "TERM": "dumb", "LANG": "C.UTF-8", "KOPF_OUTCOMES_PLUGINS": "",
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}
    for name in ("XDG_CACHE_HOME", "KUBEBUILDER_ASSETS", "KOPF_OUTCOMES_STATE_DIR"):
        if name in os.environ:
            env[name] = os.environ[name]
    terminals = {name: replay.Terminal(name, ROOT, env, tmp_path / f"{name}.log")
                 for name in ("terminal-1", "terminal-2", "terminal-3")}
    record = os.environ.get("KOPF_OUTCOMES_RECORD")
    outputs: list[tuple[Block, str]] = []
    try:
        for block in local_blocks():
            terminal = terminals[terminal_of(block)]
            typed = [line.replace(PAGE_NAMESPACE, namespace) for line in block.code.splitlines()]
            if terminal.name == "terminal-1":
                before = len(terminal.out.read_text())
                terminal.type(typed, wait=120)
                outputs.append((block, terminal.out.read_text()[before:]))
            else:
                terminal.type(typed, wait=None)  # a shard: it runs until the end; a reader waits for it
                peering = re.search(r"--peering=(\S+)", block.code)
                assert peering is not None, block.code
                deadline = time.monotonic() + 60
                while not in_peering(cluster, namespace, peering.group(1)):
                    assert time.monotonic() < deadline, terminal.out.read_text()[-3000:]
                    time.sleep(0.2)
        for block, output in outputs:
            shown = following(block)
            if "kopf-outcomes why" not in block.code or shown is None:
                continue
            got = output[output.index(f"kopfexamples.kopf.dev/my-object in namespace {namespace}"):]
            got = got.split("__done_", 1)[0]
            if record:
                Path(record).mkdir(parents=True, exist_ok=True)
                Path(record, f"why-{block.line}.txt").write_text(got.replace(namespace, PAGE_NAMESPACE))
                continue
            assert normalized(got, namespace) == normalized(shown.code), f"{block.where}:\n{got}"
        logs = {name: terminals[name].out.read_text() for name in ("terminal-2", "terminal-3")}
        assert logs["terminal-2"].count("Asked the external system to delete its side") == 1
        assert "Asked the external system" not in logs["terminal-3"]
        assert "Handler 'delete_fn' succeeded." in logs["terminal-3"]
    finally:
        for terminal in terminals.values():
            terminal.close()
