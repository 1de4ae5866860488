"""
A how-to page run as written on the local control plane: its ``sh local terminal-N`` blocks typed
into bash shells (docs/tutorial/replay.py's terminals), in the page's order, from the repository's
folder with the virtualenv's commands first on the PATH and no KUBECONFIG (the page sets it). A
block in a terminal other than the first starts an operator: it runs until the end, and the next
block waits until it keeps itself alive in its peering (``--peering=NAME``).

Two things differ from the page on purpose: its namespace becomes the test's own (runs do not
collide), and ``KOPF_OUTCOMES_PLUGINS`` is empty unless the block sets it, as for every e2e
operator (the test environment has fixture plugins installed, a broken one among them).
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

_spec = importlib.util.spec_from_file_location("tutorial_replay", ROOT / "docs" / "tutorial" / "replay.py")
assert _spec is not None and _spec.loader is not None
_tutorial = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_tutorial)
Terminal = _tutorial.Terminal


def local_blocks(page: Path) -> list[Block]:
    return [b for b in blocks(page) if b.language == "sh" and "local" in b.flags]


def terminal_of(block: Block) -> str:
    [name] = [flag for flag in block.flags if flag.startswith("terminal-")]
    return name


def normalized(text: str, namespace: str, page_namespace: str) -> list[str]:
    """An output without what differs from run to run: times, ages, identities, column widths."""
    text = text.replace(namespace, page_namespace)
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|\+00:00)?", "TIME", text)
    text = re.sub(r"\d+[smhd](\d+[smh])?\b", "AGE", text)
    text = re.sub(r"peering (\S+): \S+@\S+ \(", r"peering \1: ID (", text)
    return [" ".join(line.split()) for line in text.strip().splitlines()]


def in_peering(cluster: ClusterInfo, namespace: str, name: str) -> bool:
    done = subprocess.run(["kubectl", "--kubeconfig", str(cluster.admin_kubeconfig), "get", "kopfpeering", name,
                           "-n", namespace, "-o", "jsonpath={.status}"], capture_output=True, text=True, timeout=30)
    return done.returncode == 0 and "lastseen" in done.stdout


def replay(page: Path, page_namespace: str, cluster: ClusterInfo, namespace: str, work: Path,
           replaced: dict[str, str] | None = None) -> tuple[list[tuple[Block, str]], dict[str, str]]:
    """Run the page's blocks; each first-terminal block with its output, and each other
    terminal's whole output (its operator's log)."""
    env = {"HOME": os.environ["HOME"], "TERM": "dumb", "LANG": "C.UTF-8", "KOPF_OUTCOMES_PLUGINS": "",
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}
    for name in ("XDG_CACHE_HOME", "KUBEBUILDER_ASSETS", "KOPF_OUTCOMES_STATE_DIR"):
        if name in os.environ:
            env[name] = os.environ[name]
    terminals: dict[str, Terminal] = {}
    outputs: list[tuple[Block, str]] = []
    try:
        for block in local_blocks(page):
            name = terminal_of(block)
            if name not in terminals:
                terminals[name] = Terminal(name, ROOT, env, work / f"{name}.log")
            terminal = terminals[name]
            typed = []
            for line in block.code.splitlines():
                for old, new in {page_namespace: namespace, **(replaced or {})}.items():
                    line = line.replace(old, new)
                typed.append(line)
            if name == "terminal-1":
                before = len(terminal.out.read_text())
                terminal.type(typed, wait=120)
                outputs.append((block, terminal.out.read_text()[before:].split("__done_", 1)[0]))
                continue
            terminal.type(typed, wait=None)
            peering = re.search(r"--peering=(\S+)", block.code)
            assert peering is not None, f"{block.where}: an operator's block names its --peering"
            deadline = time.monotonic() + 60
            while not in_peering(cluster, namespace, peering.group(1)):
                assert time.monotonic() < deadline, terminal.out.read_text()[-3000:]
                time.sleep(0.2)
        return outputs, {name: t.out.read_text() for name, t in terminals.items() if name != "terminal-1"}
    finally:
        for terminal in terminals.values():
            terminal.close()


def check_outputs(outputs: list[tuple[Block, str]], namespace: str, page_namespace: str,
                  start: str = "kopf-outcomes ") -> int:
    """Each block followed by a ``text`` block shows what its last command printed; with
    ``KOPF_OUTCOMES_RECORD=DIR``, the outputs are written there instead (to refresh the page)."""
    record = os.environ.get("KOPF_OUTCOMES_RECORD")
    checked = 0
    for block, output in outputs:
        shown = following(block)
        if shown is None or shown.language != "text":
            continue
        got = output
        if record:
            Path(record).mkdir(parents=True, exist_ok=True)
            Path(record, f"{block.path.stem}-{block.line}.txt").write_text(got.replace(namespace, page_namespace))
            continue
        assert normalized(got, namespace, page_namespace) == normalized(shown.code, namespace, page_namespace), \
            f"{block.where} printed:\n{got}"
        checked += 1
    return checked
