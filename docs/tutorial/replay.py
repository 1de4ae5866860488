"""
Run the tutorial (docs/tutorial/multistep-deletion.md) literally, as a new user would, and check
that it reproduces its page: the commands are read from the page's blocks and typed into three
"terminals" (bash processes, each started with a clean environment: no virtualenv, no
KUBECONFIG), in the page's order, in an empty folder outside the checkout; the wheels come from
``scripts/dist``, installed with the page's own ``pip install --find-links`` line.

Checked: both operators' log lines, as the page shows them (without timestamps), and the time
each deletion takes (within a few seconds of the page's). Two things differ from the page on
purpose: the namespace (``tutorial-<random>``, so that runs do not collide) and the wheels'
folder. The "save this as" files are copied from the repository, as the page includes them.

    .venv/bin/python docs/tutorial/replay.py     # from a bootstrapped checkout, the cluster up
"""
from __future__ import annotations

import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.docs.blocks import Block, blocks  # noqa: E402

PAGE = ROOT / "docs" / "tutorial" / "multistep-deletion.md"
WHEELS_ON_PAGE = "~/kopf-outcomes/dist"
LOG_LINE = re.compile(r"^\[[\d\- :,]+\] kopf\.objects\s+(\[\w+\s*\] \[[^]]+\] .*)$")


class Terminal:
    """A bash reading commands as a person types them; its output goes to a file."""

    def __init__(self, name: str, cwd: Path, env: dict[str, str], out: Path) -> None:
        self.name, self.out = name, out
        self.log = out.open("w")
        self.bash = subprocess.Popen(["bash"], stdin=subprocess.PIPE, stdout=self.log, stderr=subprocess.STDOUT,
                                     cwd=cwd, env=env, text=True, start_new_session=True)
        self.count = 0

    def type(self, commands: list[str], *, wait: float | None = 120) -> None:
        """Type the commands; unless ``wait`` is None, wait until they are done (and succeeded)."""
        assert self.bash.stdin is not None
        self.count += 1
        marker = f"__done_{self.name}_{self.count}__"
        text = "\n".join(commands) + (f"\necho {marker} $?\n" if wait is not None else "\n")
        self.bash.stdin.write(text)
        self.bash.stdin.flush()
        deadline = time.monotonic() + (wait or 0)
        while wait is not None:
            found = re.search(rf"{marker} (\d+)", self.out.read_text())
            if found:
                assert found.group(1) == "0", f"terminal {self.name}: {commands} failed:\n{self.out.read_text()}"
                return
            assert time.monotonic() < deadline, f"terminal {self.name}: {commands} took too long"
            time.sleep(0.2)

    def interrupt(self) -> None:
        """Ctrl+C for what runs in the foreground (the shell's children), not the shell."""
        for child in subprocess.run(["pgrep", "-P", str(self.bash.pid)], capture_output=True,
                                    text=True).stdout.split():
            os.kill(int(child), signal.SIGINT)

    def close(self) -> None:
        self.interrupt()
        os.killpg(self.bash.pid, signal.SIGTERM)
        self.bash.wait(10)
        self.log.close()


def commands(block: Block, namespace: str, wheels: Path) -> list[str]:
    """A block's commands as typed: a console block's after its prompts, a sh block's lines."""
    lines = block.code.splitlines()
    if block.language == "console":
        lines = [line[2:] for line in lines if line.startswith("$ ")]
    typed: list[str] = []
    for line in lines:  # a line ending in a backslash goes on in the next one, as in a shell
        if typed and typed[-1].endswith("\\"):
            typed[-1] = typed[-1][:-1].rstrip() + " " + line.strip()
        else:
            typed.append(line)
    typed = [re.sub(r"(-n |--namespace |namespace )tutorial\b", rf"\g<1>{namespace}", line) for line in typed]
    return [line.replace(WHEELS_ON_PAGE, str(wheels)) for line in typed]


def page_log(block: Block, namespace: str) -> list[str]:
    return [found.group(1).replace("[tutorial/", f"[{namespace}/")
            for found in map(LOG_LINE.match, block.code.splitlines()) if found]


def run_log(text: str) -> list[str]:
    return [found.group(1) for found in map(LOG_LINE.match, text.splitlines()) if found]


def seconds(text: str) -> float:
    found = re.findall(r"real\s+(\d+)m([\d.]+)s", text)
    assert found, text
    minutes, secs = found[-1]
    return int(minutes) * 60 + float(secs)


def main() -> None:
    page = list(blocks(PAGE))
    code = [b for b in page if b.language in ("sh", "console")]
    logs = [b for b in page if b.language == "text"]
    install, cluster, folders, external, stock_run, stock_delete, ours_run, ours_delete = code[1:9]
    work = Path(tempfile.mkdtemp(prefix="kopf-outcomes-tutorial-"))
    namespace = f"tutorial-{random.randrange(16**6):06x}"
    print(f"replay: in {work}, namespace {namespace}", file=sys.stderr)
    wheels = Path(subprocess.run([ROOT / "scripts" / "dist", work / "wheels"], check=True, capture_output=True,
                                 text=True).stdout.strip())
    env = {"HOME": os.environ["HOME"], "TERM": "dumb", "LANG": "C.UTF-8",
           "PATH": os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if ".venv" not in p)}
    for name in ("XDG_CACHE_HOME", "KUBEBUILDER_ASSETS", "KOPF_OUTCOMES_STATE_DIR"):
        if name in os.environ:
            env[name] = os.environ[name]
    terminals = [Terminal(str(n), work, env, work / f"terminal-{n}.log") for n in (1, 2, 3)]
    first, second, third = terminals
    try:
        first.type(commands(install, namespace, wheels), wait=600)
        first.type(commands(cluster, namespace, wheels), wait=300)
        first.type(commands(folders, namespace, wheels))
        seed = work / "seed"
        for name in ("external_system.py", "stock_example.py", "example.py"):  # "save this as ..."
            shutil.copy(ROOT / "examples" / "multistep_deletion" / name, seed / "examples" / "multistep_deletion")
        shutil.copy(ROOT / "examples" / "obj.yaml", seed / "obj.yaml")
        second.type(commands(external, namespace, wheels), wait=None)
        results = []
        for run, delete, log in ((stock_run, stock_delete, logs[0]), (ours_run, ours_delete, logs[1])):
            before = len(third.out.read_text())
            third.type(commands(run, namespace, wheels), wait=None)
            time.sleep(8)  # the operator starts; the page's reader waits for its first lines
            first.type(commands(delete, namespace, wheels), wait=120)
            time.sleep(1)
            third.interrupt()  # Ctrl+C, as the page says, before the next step
            time.sleep(3)
            results.append((run_log(third.out.read_text()[before:]), page_log(log, namespace),
                            seconds(first.out.read_text()), delete))
        for got, shown, took, delete in results:
            assert got == shown, f"the log differs from the page:\n  got:  {got}\n  page: {shown}"
            assert abs(took - seconds(delete.code)) < 3, f"deleting took {took:.1f}s, the page says {delete.code}"
            print(f"replay: as on the page: {len(got)} log lines, deleted in {took:.1f}s", file=sys.stderr)
    finally:
        for terminal in terminals:
            terminal.close()
        from kopf_outcomes_testing.cluster import ensure_running
        from kopf_outcomes_testing.namespaces import delete_namespace
        delete_namespace(ensure_running().admin_client(), namespace)  # no controller-manager empties it
    print(f"replay: the tutorial reproduces its page (transcripts in {work})", file=sys.stderr)


if __name__ == "__main__":
    main()
