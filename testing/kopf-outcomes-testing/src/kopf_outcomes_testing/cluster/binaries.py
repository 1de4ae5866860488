"""Find ``kube-apiserver`` and ``etcd``: from ``KUBEBUILDER_ASSETS``, the cache, or a Go build.

``kube-controller-manager`` (garbage collection, namespace deletion) is found the same way but
apart, only when asked for: envtest ships no such binary, and users who never ask for the
controllers must neither need nor build it.

``k8s.io/kubernetes`` cannot be ``go install``-ed: its go.mod replaces the staging modules
(``k8s.io/api``, ``k8s.io/apiserver``, ...) with local directories, and ``etcd/server`` does
the same with its siblings. The known way around it is a throw-away main module that requires
the server module and replaces each of those siblings with its published version. The result is
cached per version, so only the first run pays the build (several minutes).
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kopf_outcomes_testing.cluster.errors import ClusterError, log_tail
from kopf_outcomes_testing.cluster.locks import file_lock
from kopf_outcomes_testing.cluster.paths import cache_root

Progress = Callable[[str], None]

ASSETS_ENV = "KUBEBUILDER_ASSETS"
KUBERNETES_VERSION = "v1.34.4"
ETCD_VERSION = "v3.6.4"  # the etcd client version that Kubernetes 1.34 is built and tested with
PROGRESS_INTERVAL = 10.0  # seconds between progress lines of a running build step


@dataclass(frozen=True)
class Binaries:
    """The two server executables a control plane needs."""

    kube_apiserver: Path
    etcd: Path


@dataclass(frozen=True)
class GoBuild:
    """How to build one server from a module whose go.mod replaces its siblings locally."""

    binary: str
    module: str
    version: str
    package: str
    sibling_prefix: str  # the locally-replaced modules we must pin to published versions
    sibling_version: str
    ldflags: str
    instead: str = f"set {ASSETS_ENV} to a folder with kube-apiserver and etcd"  # the other way to get it


def _kube_ldflags(version: str) -> str:
    major, minor = version.lstrip("v").split(".")[:2]
    pkg = "k8s.io/component-base/version"
    return (f"-s -w -X {pkg}.gitVersion={version} -X {pkg}.gitMajor={major}"
            f" -X {pkg}.gitMinor={minor} -X {pkg}.gitTreeState=clean")


BUILDS = (
    GoBuild(
        binary="kube-apiserver",
        module="k8s.io/kubernetes",
        version=KUBERNETES_VERSION,
        package="k8s.io/kubernetes/cmd/kube-apiserver",
        sibling_prefix="k8s.io/",
        sibling_version="v0" + KUBERNETES_VERSION[2:],  # staging modules: v1.34.4 -> v0.34.4
        ldflags=_kube_ldflags(KUBERNETES_VERSION),
    ),
    GoBuild(
        binary="etcd",
        module="go.etcd.io/etcd/server/v3",
        version=ETCD_VERSION,
        package="go.etcd.io/etcd/server/v3",  # its main.go calls etcdmain.Main
        sibling_prefix="go.etcd.io/etcd/",
        sibling_version=ETCD_VERSION,
        ldflags="-s -w",
    ),
)

# Built from the same module and version as kube-apiserver: the module is downloaded already and
# most packages are in Go's build cache, so its build costs a fraction of the first one.
CONTROLLER_MANAGER = GoBuild(
    binary="kube-controller-manager",
    module="k8s.io/kubernetes",
    version=KUBERNETES_VERSION,
    package="k8s.io/kubernetes/cmd/kube-controller-manager",
    sibling_prefix="k8s.io/",
    sibling_version="v0" + KUBERNETES_VERSION[2:],
    ldflags=_kube_ldflags(KUBERNETES_VERSION),
)

# Prometheus and promtool, for the tests of the Prometheus plugin's alert rules and scraping, where
# Debian's package cannot be installed (no root): built the same way (its go.mod replaces klog).
PROMETHEUS_VERSION = "v2.53.4"  # an LTS release; its Go module is tagged v0.53.4
PROMETHEUS_BUILDS = tuple(
    GoBuild(
        binary=binary,
        module="github.com/prometheus/prometheus",
        version="v0" + PROMETHEUS_VERSION[2:],
        package=f"github.com/prometheus/prometheus/cmd/{binary}",
        sibling_prefix="github.com/prometheus/prometheus/",
        sibling_version="v0" + PROMETHEUS_VERSION[2:],
        ldflags=f"-s -w -X github.com/prometheus/common/version.Version={PROMETHEUS_VERSION[1:]}",
        instead="install Debian's prometheus package (as root: apt-get install prometheus)",
    )
    for binary in ("promtool", "prometheus")
)

_LOCAL_REPLACE = re.compile(r"^\s*(?:replace\s+)?(\S+)(?:\s+v\S+)?\s+=>\s+\.\.?/", re.MULTILINE)
_PUBLISHED_REPLACE = re.compile(r"^\s*(?:replace\s+)?(\S+(?:\s+v\S+)?\s+=>\s+\S+\s+v\S+)\s*$", re.MULTILINE)
_GO_DIRECTIVE = re.compile(r"^go\s+(\S+)\s*$", re.MULTILINE)


class BinariesMissing(ClusterError):
    """Neither ``KUBEBUILDER_ASSETS`` nor the cache has the servers, and building was not allowed."""


def find_binaries(progress: Progress, *, build: bool = True) -> Binaries:
    """Use ``KUBEBUILDER_ASSETS`` if set (the envtest convention), else the cache or a build.

    With ``build=False`` (the pytest fixtures' default), missing binaries raise
    :class:`BinariesMissing` naming the ways to get them, instead of a Go build of minutes.
    """
    assets = os.environ.get(ASSETS_ENV)
    if assets:
        return _from_assets(Path(assets))
    if not build and _missing(bin_dir(), BUILDS):
        raise BinariesMissing(
            f"kube-apiserver {KUBERNETES_VERSION} and etcd {ETCD_VERSION} are not available:"
            f" {ASSETS_ENV} is not set and {bin_dir()} has no build of them",
            f"either point {ASSETS_ENV} at envtest's binaries"
            f" (`setup-envtest use -p path {KUBERNETES_VERSION[1:].rsplit('.', 1)[0]}.x`),"
            " or build them once (Go, several minutes) with `kopf-outcomes cluster build`,"
            f" or allow the build here with --kopf-outcomes-build (or KOPF_OUTCOMES_BUILD=1)")
    return _cached_or_built(progress)


def find_controller_manager(progress: Progress, *, build: bool = True) -> Path:
    """``kube-controller-manager``: from ``KUBEBUILDER_ASSETS`` if it has one, else cache or build.

    Asked for only by a control plane started with controllers; with ``build=False`` a missing
    binary raises :class:`BinariesMissing` naming the ways to get it.
    """
    name = CONTROLLER_MANAGER.binary
    assets = os.environ.get(ASSETS_ENV)
    if assets and _executable(Path(assets) / name):
        return Path(assets) / name
    if not build and _missing(bin_dir(), (CONTROLLER_MANAGER,)):
        raise BinariesMissing(
            f"{name} {KUBERNETES_VERSION} is not available: {bin_dir()} has no build of it"
            + (f" and {ASSETS_ENV}={assets} has none (envtest ships none)" if assets else ""),
            "build it once (Go, minutes) with `kopf-outcomes cluster build --controllers`,"
            " or allow the build here with --kopf-outcomes-build (or KOPF_OUTCOMES_BUILD=1)")
    return build_controller_manager(progress)


def build_binaries(progress: Progress) -> Binaries:
    """Build (or find cached) the pinned versions with Go, whatever ``KUBEBUILDER_ASSETS`` says."""
    return _cached_or_built(progress)


def build_controller_manager(progress: Progress) -> Path:
    """Build (or find cached) the pinned kube-controller-manager, whatever ``KUBEBUILDER_ASSETS`` says."""
    _build_missing(bin_dir(), (CONTROLLER_MANAGER,), progress)
    return bin_dir() / CONTROLLER_MANAGER.binary


def build_prometheus(progress: Progress) -> Path:
    """Build (or find cached) the pinned promtool and prometheus; return their folder."""
    _build_missing(prometheus_dir(), PROMETHEUS_BUILDS, progress)
    return prometheus_dir()


def prometheus_dir() -> Path:
    """The cache folder of the Go-built promtool and prometheus."""
    return cache_root() / "bin" / "prometheus"


def bin_dir() -> Path:
    """The cache folder of one pinned Kubernetes version's binaries."""
    return cache_root() / "bin" / KUBERNETES_VERSION


def _from_assets(folder: Path) -> Binaries:
    hint = (f"point {ASSETS_ENV} at a folder with both binaries (as setup-envtest prints),"
            " or unset it to build them with Go")
    if not folder.is_dir():
        raise ClusterError(f"{ASSETS_ENV}={folder} is not a directory", hint)
    missing = [name for name in ("kube-apiserver", "etcd") if not _executable(folder / name)]
    if missing:
        raise ClusterError(
            f"{ASSETS_ENV}={folder} has no executable {' or '.join(missing)}", hint)
    return Binaries(kube_apiserver=folder / "kube-apiserver", etcd=folder / "etcd")


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _cached_or_built(progress: Progress) -> Binaries:
    folder = bin_dir()
    _build_missing(folder, BUILDS, progress)
    return Binaries(kube_apiserver=folder / "kube-apiserver", etcd=folder / "etcd")


def _build_missing(folder: Path, builds: tuple[GoBuild, ...], progress: Progress) -> None:
    """Build those of ``builds`` that the cache lacks (or has of another version), once."""
    if not _missing(folder, builds):
        return
    go = shutil.which("go")
    if go is None:
        names = " and ".join(f"{b.binary} {b.version}" for b in _missing(folder, builds))
        raise ClusterError(
            f"the Go toolchain (`go`) is not on PATH; it is needed once to build {names}",
            f"install Go >= 1.24 (https://go.dev/dl/) and add it to PATH, or {builds[0].instead}")
    with file_lock(folder / ".build.lock"):
        for build in _missing(folder, builds):  # again: another process may have built meanwhile
            _build(go, build, folder, progress)


def _missing(folder: Path, builds: tuple[GoBuild, ...]) -> list[GoBuild]:
    recorded = _recorded_versions(folder)
    return [build for build in builds
            if not (folder / build.binary).is_file() or recorded.get(build.binary) != build.version]


def _recorded_versions(folder: Path) -> dict[str, str]:
    try:
        data = json.loads((folder / "versions.json").read_text())
    except (OSError, ValueError):
        return {}
    return {str(name): str(entry.get("version")) for name, entry in data.items()}


def _record_version(folder: Path, build: GoBuild, go_version: str) -> None:
    path = folder / "versions.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    data[build.binary] = {"version": build.version, "go": go_version,
                          "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)


def _build(go: str, build: GoBuild, folder: Path, progress: Progress) -> None:
    """Build one binary into a temporary name in ``folder``, then rename it into place."""
    folder.mkdir(parents=True, exist_ok=True)
    log_path = folder / f"{build.binary}.build.log"
    log_path.write_text("")
    work = Path(tempfile.mkdtemp(prefix=f"build-{build.binary}-", dir=cache_root()))
    tmp_out = folder / f".{build.binary}.{os.getpid()}.tmp"
    step = _StepRunner(go, build, work, log_path, progress)
    progress(f"building {build.binary} {build.version} with Go (first time only, takes minutes);"
             f" log: {log_path}")
    try:
        info = json.loads(step.run(
            f"downloading {build.module}@{build.version}",
            ["mod", "download", "-json", f"{build.module}@{build.version}"]))
        upstream = Path(info["GoMod"]).read_text()
        gomod = _throwaway_gomod(build, upstream)
        (work / "go.mod").write_text(gomod)
        with log_path.open("a") as log:  # what was built is part of why it failed
            log.write(f"--- {work / 'go.mod'} ---\n{gomod}")
        step.run(f"downloading dependencies and compiling {build.binary}",
                 ["build", "-v", "-o", str(tmp_out), "-ldflags", build.ldflags, build.package])
        go_version = step.run("checking the Go version", ["env", "GOVERSION"]).strip()
        os.replace(tmp_out, folder / build.binary)
        _record_version(folder, build, go_version)
    finally:
        tmp_out.unlink(missing_ok=True)
        shutil.rmtree(work, ignore_errors=True)
    progress(f"built {build.binary} {build.version} in {step.elapsed():.0f}s")


def _throwaway_gomod(build: GoBuild, upstream: str) -> str:
    """A main module requiring ``build.module`` with its local replaces made published ones, and
    its replaces by published modules kept (a main module's replaces are the only ones Go reads)."""
    siblings = sorted({m for m in _LOCAL_REPLACE.findall(upstream)
                       if m.startswith(build.sibling_prefix)})
    go_directive = _GO_DIRECTIVE.search(upstream)
    lines = ["module kopfoutcomesbuild", ""]
    if go_directive:  # the upstream's language version, so the binary's GODEBUG defaults match
        lines += [f"go {go_directive.group(1)}", ""]
    lines += [f"require {build.module} {build.version}", "", "replace ("]
    lines += [f"\t{m} => {m} {build.sibling_version}" for m in siblings]
    lines += [f"\t{' '.join(line.split())}" for line in _PUBLISHED_REPLACE.findall(upstream)]
    lines += [")", ""]
    return "\n".join(lines)


class _StepRunner:
    """Runs ``go`` sub-commands of one build, logging them and reporting progress."""

    def __init__(self, go: str, build: GoBuild, work: Path, log_path: Path,
                 progress: Progress) -> None:
        self.go = go
        self.build = build
        self.work = work
        self.log_path = log_path
        self.progress = progress
        self.started = time.monotonic()
        self.env = {**os.environ, "GOFLAGS": "-mod=mod"}

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def run(self, title: str, args: list[str]) -> str:
        """Run ``go args`` with stderr into the log; return stdout; fail with the log's tail."""
        argv = [self.go, *args]
        self.progress(f"  [{self.elapsed():4.0f}s] {title}")
        with self.log_path.open("a") as log:
            log.write(f"$ {shlex.join(argv)}\n")
            log.flush()
            proc = subprocess.Popen(argv, cwd=self.work, env=self.env, text=True,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log)
            try:
                stdout = self._communicate(proc, title)
            except BaseException:
                proc.kill()
                proc.wait()
                raise
            log.write(stdout)  # `go mod download -json` reports its errors on stdout
        if proc.returncode != 0:
            raise ClusterError(
                f"building {self.build.binary} {self.build.version} failed:"
                f" `go {' '.join(args[:2])}` exited with code {proc.returncode}",
                f"fix the cause in the log {self.log_path} (the Go module proxy must be reachable)"
                f" and retry, or {self.build.instead}",
                log_tail(self.log_path.read_text(errors="replace"), title=str(self.log_path)))
        return stdout

    def _communicate(self, proc: subprocess.Popen[str], title: str) -> str:
        while True:
            try:
                stdout, _ = proc.communicate(timeout=PROGRESS_INTERVAL)
                return stdout
            except subprocess.TimeoutExpired:
                last = _last_line(self.log_path)
                self.progress(f"  [{self.elapsed():4.0f}s] {title}" + (f": {last}" if last else ""))


def _last_line(path: Path) -> str:
    with path.open("rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - 400))
        lines = f.read().decode(errors="replace").strip().splitlines()
    return lines[-1][:120] if lines else ""
