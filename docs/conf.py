"""Sphinx configuration of the kopf-outcomes documentation (built by ``tox -e docs``)."""
from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))  # `examples` is imported by literalinclude'd code's readers

project = "kopf-outcomes"
author = "the kopf-outcomes authors"
copyright = "2026, the kopf-outcomes authors"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx_click",
    "sphinx_copybutton",
    "policy_keys",
    "public_api",
    "optional_doc",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "README.md"]
# Pages in the index's toctree that other work adds; each is listed only when its file is there.
OPTIONAL_PAGES = ("compatibility", "observability")
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist"]

html_theme = "furo"
# The version in the sidebar, under the title (furo shows html_title there).
version = release = importlib.metadata.version("kopf-outcomes")
html_title = f"kopf-outcomes {release}"
html_static_path = ["_static"]
html_css_files = ["readable.css"]
# The copy button leaves out console prompts ("$ ") and the output after them.
copybutton_prompt_text = r"\$ |>>> |\.\.\. "
copybutton_prompt_is_regexp = True
copybutton_only_copy_prompt_lines = True

# Autodoc: the public names, in source order, with signatures typed as the code types them.
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True

# Warnings are errors (sphinx-build -W); a reference that resolves nowhere is a warning too.
nitpicky = True
# No network while building: Kopf's, pluggy's and the standard library's own names are not
# linked (no intersphinx), so references to them are expected to stay unresolved.
nitpick_ignore_regex = [
    # Docstrings name the internal modules that do the work; the reference documents public names.
    (r"py:.*", r"kopf_outcomes\.(_\w+|misuse|memory|manager|engine|builtin|installation|values|errors|options|refusals|"
               r"runs|outcomes|policy\.(validation|loading|model|errors|plugin|resolution|cli))(\..*)?"),
    (r"py:.*", r"get_canonical_name"),  # pluggy's, in the docstring of PluginManager.register
    # Internal types that public signatures mention (the reference documents public names only).
    (r"py:.*", r"(kopf_outcomes\.(memory|options|plugins|recollection|runs|outcomes|objects|_kopf)\.)?"
               r"(Record|FnT|Plugins|Conclusion|FatalOnDelete)"),
    # autodoc splits stringified generic annotations ("tuple[str, ...]") at commas.
    (r"py:.*", r"(tuple|dict|list|Mapping)\[.*"),
    (r"py:.*", r"(kopf|pluggy|logging|datetime|collections|typing|types|enum|os|pathlib|kubernetes_asyncio)(\..*)?"),
    (r"py:.*", r"PluginManager(\..*)?"),  # pluggy's docstring of the hookimpl marker
    (r"py:.*", r"client\.ApiClient"),  # kubernetes_asyncio's, as client.signal's annotation names it
    (r"py:.*", r"(Any|Literal|Mapping|Sequence|Iterable|Collection|MutableMapping|NamedTuple|Exception)"),
    (r"py:.*", r"(None|NoneType|int|float|str|bool|object|dict|list|tuple|set|frozenset|type|BaseException)"),
]

# linkcheck (also in `tox -e docs`) checks the site's own links and anchors; the outside world
# is not reached from the build machine.
linkcheck_ignore = [r"https?://.*"]
linkcheck_anchors = True


def _leave_out_missing_pages(app: object, docname: str, source: list[str]) -> None:
    if docname == "index":
        for page in OPTIONAL_PAGES:
            if not (HERE / f"{page}.md").exists():
                source[0] = source[0].replace(f"\n{page}\n", "\n")


def setup(app: object) -> None:
    app.connect("source-read", _leave_out_missing_pages)  # type: ignore[attr-defined]
