"""What installing kopf-outcomes costs others, side by side in one run (issue 11's figures).

Three fresh virtualenvs with the same Kopf and pytest:

- ``kopf``:    Kopf and pytest alone (the baseline);
- ``runtime``: the same plus the kopf-outcomes runtime wheel (what an operator image gets);
- ``testing``: the same plus kopf-outcomes-testing (the control plane and the pytest plugin,
  with kubernetes-asyncio, cryptography, psutil, pytest-asyncio).

Measured, interleaved round by round so that the shared machine's noise hits all alike, in CPU
time (user + system: waiting for a core on a shared machine adds wall time only), the minimum
of the rounds as the figure (noise only ever adds), the median and the wall-clock beside it:
``import kopf`` in-process (target: runtime ≤ 1.05× kopf), an unrelated pytest run (a file with
one trivial test; target: ≤ 30 ms more), and, in ``testing``, the same run with
``-p no:kopf_outcomes`` (the plugin's own registration cost) and the modules the plugin adds.
Also the wheels' sizes. Prints a table and, with ``--out``, JSON. Asserts nothing.

    .venv/bin/python -m benchmarks.footprint [--rounds 30] [--out footprint.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMPORT_KOPF = ("import time; w, c = time.perf_counter(), time.process_time(); import kopf;"
               " print(time.perf_counter() - w, time.process_time() - c)")
MODULES_CONFTEST = """
import json, os, sys

def pytest_sessionfinish(session):
    path = os.environ.get("MODULES_OUT")
    if path:
        with open(path, "w") as f:
            json.dump(sorted(sys.modules), f)
"""


def say(message: str) -> None:
    print(f"footprint: {message}", file=sys.stderr, flush=True)


def make_venv(folder: Path, *requirements: str) -> Path:
    python = folder / "bin" / "python"
    if python.exists():  # --work given again: reuse (pip below only checks)
        return python
    venv.create(folder, with_pip=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *requirements],
                   check=True)
    return python


def build_wheels(out: Path) -> dict[str, Path]:
    for project in (ROOT, ROOT / "testing" / "kopf-outcomes-testing"):
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), str(project)],
                       check=True)
    return {"runtime": next(out.glob("kopf_outcomes-*.whl")), "testing": next(out.glob("kopf_outcomes_testing-*.whl"))}


def timed_run(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall-clock and CPU seconds (user + system) of one run of ``argv``.

    CPU time is the steadier figure on a shared machine: waiting for a core adds wall time only.
    """
    started = time.perf_counter()
    process = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"{argv} exited with {process.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def import_time(python: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall-clock and CPU seconds of ``import kopf``, measured inside the interpreter."""
    result = subprocess.run([str(python), "-c", IMPORT_KOPF], env=env, check=True, capture_output=True, text=True)
    wall, cpu = result.stdout.split()
    return float(wall), float(cpu)


def plugin_modules(python: Path, project: Path, env: dict[str, str]) -> list[str]:
    found = {}
    for label, extra in (("with", []), ("without", ["-p", "no:kopf_outcomes"])):
        out = project / f"modules-{label}.json"
        subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra], cwd=project,
                       env={**env, "MODULES_OUT": str(out)}, check=True, capture_output=True)
        found[label] = set(json.loads(out.read_text()))
        out.unlink()
    return sorted(found["with"] - found["without"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--work", type=Path,
                        help="a folder for the virtualenvs, reused if there (default: a new temporary one)")
    args = parser.parse_args()

    work = args.work or Path(tempfile.mkdtemp(prefix="kopf-outcomes-footprint-"))
    work.mkdir(parents=True, exist_ok=True)
    kopf = f"kopf=={version('kopf')}"
    pytest = f"pytest=={version('pytest')}"
    say(f"building the wheels and three virtualenvs in {work} ({kopf}, {pytest})")
    wheels = build_wheels(work / "dist")
    pythons = {
        "kopf": make_venv(work / "kopf", kopf, pytest),
        "runtime": make_venv(work / "runtime", kopf, pytest, str(wheels["runtime"])),
        "testing": make_venv(work / "testing", kopf, pytest, str(wheels["runtime"]), str(wheels["testing"])),
    }
    project = work / "unrelated"
    project.mkdir(exist_ok=True)
    (project / "test_unrelated.py").write_text("def test_arithmetic():\n    assert 1 + 1 == 2\n")
    (project / "conftest.py").write_text(MODULES_CONFTEST)
    kubeconfig = work / "kubeconfig"
    kubeconfig.write_text("{}")
    env = {"PATH": os.environ["PATH"], "HOME": str(work), "KUBECONFIG": str(kubeconfig)}

    pytest_runs = {
        "kopf": [str(pythons["kopf"]), "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        "runtime": [str(pythons["runtime"]), "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        "testing": [str(pythons["testing"]), "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        "testing, -p no:kopf_outcomes": [str(pythons["testing"]), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                         "-p", "no:kopf_outcomes"],
    }
    imports: dict[str, list[tuple[float, float]]] = {name: [] for name in pythons}
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in pytest_runs}
    for python in pythons.values():  # warm the file caches before measuring
        import_time(python, env)
    say(f"measuring, {args.rounds} interleaved rounds")
    for _ in range(args.rounds):
        for name, python in pythons.items():
            imports[name].append(import_time(python, env))
        for name, argv in pytest_runs.items():
            runs[name].append(timed_run(argv, project, env))

    added = plugin_modules(pythons["testing"], project, env)

    def paired(samples: dict[str, list[tuple[float, float]]], a: str, b: str, *, ratio: bool) -> float:
        """The median over rounds of a/b (or a−b, in ms) in CPU time: each round compares like with like."""
        pairs = zip(samples[a], samples[b], strict=True)
        return statistics.median(x[1] / y[1] if ratio else (x[1] - y[1]) * 1000 for x, y in pairs)

    def medians(samples: dict[str, list[tuple[float, float]]], index: int) -> dict[str, float]:
        return {name: statistics.median(v[index] for v in values) * 1000 for name, values in samples.items()}

    noplugin = "testing, -p no:kopf_outcomes"
    report = {
        "kopf": version("kopf"), "pytest": version("pytest"), "python": sys.version.split()[0],
        "rounds": args.rounds,
        "import_kopf_cpu_median_ms": medians(imports, 1),
        "import_kopf_wall_median_ms": medians(imports, 0),
        "import_kopf_ratio_runtime": paired(imports, "runtime", "kopf", ratio=True),
        "import_kopf_ratio_testing": paired(imports, "testing", "kopf", ratio=True),
        "pytest_run_cpu_median_ms": medians(runs, 1),
        "pytest_run_wall_median_ms": medians(runs, 0),
        "pytest_run_diff_runtime_ms": paired(runs, "runtime", "kopf", ratio=False),
        "pytest_run_diff_testing_ms": paired(runs, "testing", "kopf", ratio=False),
        "pytest_run_diff_plugin_ms": paired(runs, "testing", noplugin, ratio=False),
        "plugin_modules_at_registration": added,
        "wheel_kib": {name: path.stat().st_size / 1024 for name, path in wheels.items()},
        "samples": {"import_kopf": imports, "pytest_run": runs},
    }
    cpu_imp, wall_imp = report["import_kopf_cpu_median_ms"], report["import_kopf_wall_median_ms"]
    cpu_run, wall_run = report["pytest_run_cpu_median_ms"], report["pytest_run_wall_median_ms"]
    assert isinstance(cpu_imp, dict) and isinstance(wall_imp, dict)
    assert isinstance(cpu_run, dict) and isinstance(wall_run, dict)
    print(f"Kopf {report['kopf']}, pytest {report['pytest']}, Python {report['python']}; "
          f"{args.rounds} interleaved rounds; medians; CPU = user + system")
    print(f"{'import kopf':<34}{'CPU ms':>9}{'wall ms':>9}   paired CPU ratio vs kopf")
    for name in pythons:
        ratio = paired(imports, name, "kopf", ratio=True)
        print(f"  {name:<32}{cpu_imp[name]:>9.1f}{wall_imp[name]:>9.1f}   {ratio:.3f}×")
    print(f"{'unrelated pytest run':<34}{'CPU ms':>9}{'wall ms':>9}   paired CPU difference vs kopf")
    for name in pytest_runs:
        diff = paired(runs, name, "kopf", ratio=False)
        print(f"  {name:<32}{cpu_run[name]:>9.1f}{wall_run[name]:>9.1f}   {diff:+.1f} ms")
    print(f"the plugin's registration (testing − {noplugin}), paired CPU: "
          f"{report['pytest_run_diff_plugin_ms']:+.1f} ms")
    print(f"modules the plugin adds at registration: {len(added)} {added}")
    for name, size in report["wheel_kib"].items():
        print(f"wheel {name}: {size:.1f} KiB")
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
