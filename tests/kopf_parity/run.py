"""
Kopf's own test suite, run twice on the installed Kopf: stock, and with ``kopf_outcomes.install()``
active for every test (no plugins, no policy). The verdict is 0 new failures. See README.md.

Usage: python tests/kopf_parity/run.py [--workers N] [--break MODE] [-- pytest args, e.g. tests/handling]
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import results  # noqa: E402
import sdist  # noqa: E402

# Kopf's own limit per test is 2 s of real time, for its CI machines; on a shared 2-core machine a
# loaded moment exceeded it inside xdist's own code and crashed a worker. The tests' time is
# looptime's fake time anyway: this limit only catches hangs.
TIMEOUT = float(os.environ.get("KOPF_PARITY_TIMEOUT", "30"))


def pytest(root: Path, report: Path, args: list[str], *, patched: bool, workers: int,
           stats: Path | None = None, breaking: str = "") -> None:
    env = dict(os.environ)
    env.pop("KOPF_OUTCOMES_POLICY", None)
    env.pop("KOPF_PARITY_BREAK", None)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), *filter(None, [env.get("PYTHONPATH")])])
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
               "-o", "junit_family=xunit1", "--no-header", "-rN", "--tb=line" if workers else "--tb=short",
               "-p", "kopf_parity_order", "-o", f"timeout={TIMEOUT}", "--continue-on-collection-errors"]
    command += ["-n", str(workers)] if workers else ["-p", "no:xdist"]
    if patched:
        command += ["-p", "kopf_parity_plugin"]
        env["KOPF_OUTCOMES_PLUGINS"] = ""
        env["KOPF_PARITY_STATS"] = str(stats)
        if breaking:
            env["KOPF_PARITY_BREAK"] = breaking
    started = time.monotonic()
    code = subprocess.run(command + args, cwd=root, env=env).returncode
    print(f"parity: {'patched' if patched else 'stock'} run: pytest exit {code} "
          f"in {time.monotonic() - started:.0f}s", flush=True)
    if code not in (0, 1):  # 5 is "no tests ran"; 2-4 are interrupted, internal or usage errors
        raise SystemExit(f"parity: pytest exited with {code} in the {'patched' if patched else 'stock'} run")


def reports_dir(version: str, keep: int = 5) -> Path:
    """A fresh folder per run (runs may overlap), the oldest beyond ``keep`` removed."""
    parent = sdist.CACHE / "parity-reports"
    parent.mkdir(parents=True, exist_ok=True)
    for old in sorted(parent.iterdir(), key=lambda path: path.stat().st_mtime)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"kopf-{version}-{time.strftime('%Y%m%d-%H%M%S')}-", dir=parent))


def patch_stats(stats: Path) -> tuple[int, list[str]]:
    """How many checks of the patch were done (all workers), and which found it inactive."""
    files = glob.glob(f"{stats}.*.json")
    if not files:
        return 0, ["the plugin wrote no statistics: was it loaded?"]
    checks, inactive = 0, []
    for file in files:
        data = json.loads(Path(file).read_text())
        checks += data["checks"]
        inactive += data["inactive"]
    return checks, inactive


def show(title: str, tests: set[str]) -> None:
    print(f"\n{title}: {len(tests)}")
    for test in sorted(tests):
        print(f"    {results.node_id(test)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=int(os.environ.get("KOPF_PARITY_WORKERS", "2")),
                        help="pytest-xdist workers (0: none); default 2")
    parser.add_argument("--break", dest="breaking", choices=["retry-delay", "uninstalled"], default="",
                        help="test-only: break the patch on purpose, to see the job fail")
    parser.add_argument("--no-install", action="store_true", help="do not pip-install Kopf's test requirements")
    parser.add_argument("pytest_args", nargs="*", help="paths or options for pytest (default: Kopf's tests/)")
    options = parser.parse_args()

    started = time.monotonic()
    version = sdist.installed_kopf()
    root = sdist.unpack(sdist.fetch(version), version)
    if not options.no_install:
        sdist.install_requirements(sdist.test_requirements(root))
    out = reports_dir(version)
    print(f"parity: Kopf {version}'s suite in {root}; reports in {out}", flush=True)
    args = options.pytest_args or ["tests"]

    pytest(root, out / "stock.xml", args, patched=False, workers=options.workers)
    pytest(root, out / "patched.xml", args, patched=True, workers=options.workers,
           stats=out / "stats", breaking=options.breaking)
    stock, patched = results.read(out / "stock.xml"), results.read(out / "patched.xml")
    checks, inactive = patch_stats(out / "stats")
    if not stock.outcomes or not patched.outcomes:
        raise SystemExit("parity: no tests ran")
    missing = set(stock.outcomes) ^ set(patched.outcomes)  # a crash or a collection difference

    new = patched.ids("failed") - stock.ids("failed")
    confirmed: set[str] = set()
    unconfirmed: set[str] = set()
    if new and not missing:  # once more each, one by one, in both modes: a new failure must reproduce to count
        ids = sorted(results.node_id(test) for test in new)
        pytest(root, out / "stock-rerun.xml", ids, patched=False, workers=0)
        pytest(root, out / "patched-rerun.xml", ids, patched=True, workers=0,
               stats=out / "rerun-stats", breaking=options.breaking)
        stock_again, patched_again = results.read(out / "stock-rerun.xml"), results.read(out / "patched-rerun.xml")
        for test in new:
            reproduced = patched_again.outcomes.get(test, "failed") == "failed"
            fine_stock = stock_again.outcomes.get(test) in ("passed", "skipped")
            (confirmed if reproduced and fine_stock else unconfirmed).add(test)

    print(f"\nKopf {version}, Python {sys.version.split()[0]}: {len(stock.outcomes)} tests in the stock run, "
          f"{len(patched.outcomes)} in the patched run, "
          f"{time.monotonic() - started:.0f}s")
    print(f"stock:   passed {stock.count('passed')}, failed {stock.count('failed')}, "
          f"skipped {stock.count('skipped')}")
    print(f"patched: passed {patched.count('passed')}, failed {patched.count('failed')}, "
          f"skipped {patched.count('skipped')}")
    print(f"patch checked active {checks - len(inactive)} of {checks} times (before and after every test)"
          + (f"; broken on purpose: {options.breaking}" if options.breaking else ""))
    show("failing in both runs (environment, not the patch)", stock.ids("failed") & patched.ids("failed"))
    show("failing only in the stock run", stock.ids("failed") - patched.ids("failed"))
    show("new failures that did not reproduce on a rerun (flaky; not counted)", unconfirmed)
    show("RAN IN ONE RUN ONLY (the runs are not comparable)", missing)
    if missing:
        show("failed only with the patch (not re-run: the runs are not comparable)", new)
    show("NEW FAILURES (failed with the patch, reproduced; pass stock)", confirmed)
    for line in inactive[:20]:
        print(f"    patch INACTIVE: {line}")
    ok = not confirmed and not inactive and checks > 0 and not missing
    print(f"\nparity: {'OK' if ok else 'FAILED'}: {len(confirmed)} new failures; "
          f"{len(inactive)} checks found the patch inactive; {len(missing)} tests ran in one run only")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
