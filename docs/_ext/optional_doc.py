"""
The ``optional-doc`` role: a link to a page that other work adds to the site, written as
``{optional-doc}`observability```. When the page is there, it is an ordinary ``{doc}`` link;
until then, the page's file name in code style, so the build stays warning-free either way.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxRole


class OptionalDoc(SphinxRole):
    def run(self) -> tuple[list[nodes.Node], list[nodes.system_message]]:
        target = self.text.strip()
        _, absolute = self.env.relfn2path(f"{target}.md", self.env.docname)
        if not Path(absolute).exists():
            return [nodes.literal(self.rawtext, f"{Path(target).name}.md")], []
        reference = addnodes.pending_xref(self.rawtext, refdomain="std", reftype="doc", reftarget=target,
                                          refexplicit=False, refwarn=True, refdoc=self.env.docname)
        reference += nodes.inline(self.rawtext, "", classes=["xref", "std", "std-doc"])
        return [reference], []


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_role("optional-doc", OptionalDoc())
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
