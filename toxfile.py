"""
tox's inline plugin: let tox find the CPython versions that pyenv installed, without a pyenv setup.

pyenv's shims run only the versions selected by ``pyenv global``/``local``; the matrix needs all of
3.10-3.13. Their ``bin`` directories go at the end of PATH (for tox's interpreter discovery only
when nothing earlier on PATH provides the version), so an interpreter found elsewhere still wins.
"""
from __future__ import annotations

import glob
import os

_root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
_found = sorted(glob.glob(os.path.join(_root, "versions", "3.*", "bin")))
_path = os.environ.get("PATH", "").split(os.pathsep)
os.environ["PATH"] = os.pathsep.join(_path + [entry for entry in _found if entry not in _path])
