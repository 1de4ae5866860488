"""
docs/howto/write-plugin.md, literally: from an empty folder outside the checkout, its ``sh`` blocks
run in order in one bash (a new terminal's environment: no virtualenv of this project), its
"save this as" files are the repository's files that the page includes, and the plugin's own test
passes against the local control plane. Only the wheels' folder (``~/kopf-outcomes/dist`` on the
page) is this test's own.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from kopf_outcomes_testing import ClusterInfo
from tests.docs.blocks import ROOT, Block, blocks
from tests.packaging.test_install import DOCUMENTED_FOLDER, clean_env

PAGE = ROOT / "docs" / "howto" / "write-plugin.md"
SAVED = {"quiet_timeouts.py", "pyproject.toml", "test_quiet_timeouts.py"}  # "save this as" on the page


def documented(flag: str) -> Block:
    [found] = [b for b in blocks(PAGE) if b.language == "sh" and flag in b.flags]
    return found


def test_the_page_saves_exactly_the_repository_files_it_includes() -> None:
    text = PAGE.read_text()
    included = re.findall(r"```\{literalinclude\} \.\./\.\./examples/plugin/(\S+)", text)
    saved = re.findall(r"[Ss]ave (?:this|it) as\s+`([^`]+)`", text)
    assert sorted(included) == sorted(saved) == sorted(SAVED)


def test_the_write_a_plugin_howto_runs_as_written(tmp_path: Path, dist_wheels: Path,
                                                 k8s_cluster: ClusterInfo) -> None:
    wheels = dist_wheels
    work = tmp_path / "work"
    work.mkdir()
    env = clean_env()
    script = [documented("write-plugin-folder").code]
    for name in sorted(SAVED):  # the reader saves the page's files into the new folder
        script.append(f"cp {ROOT / 'examples' / 'plugin' / name} {name}")
    for flag in ("write-plugin-install", "write-plugin-test"):
        code = documented(flag).code
        assert DOCUMENTED_FOLDER in code or flag != "write-plugin-install"
        script.append(code.replace(DOCUMENTED_FOLDER, str(wheels)))
    assert shutil.which("bash") is not None
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", "\n".join(script)], cwd=work, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    listing = done.stdout
    assert re.search(r"^  quiet_timeouts +entry point quiet_timeouts \(kopf-outcomes-quiet-timeouts 1\.0\.0\)$",
                     listing, re.MULTILINE), listing
    hook = listing.index("  kopf_outcomes_classify_exception (firstresult")
    assert listing[hook:].splitlines()[1] == "    quiet_timeouts"
    assert re.search(r"^=+ 1 passed in [\d.]+s", listing, re.MULTILINE), listing
