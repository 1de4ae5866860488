"""
The ``public-api`` directive: autodoc of every name in a module's ``__all__``, under the
public name (``kopf_outcomes.Pending``, not where it is defined), so that the reference
follows the package's own list of public names as it changes.

    ```{public-api} kopf_outcomes
    ```
"""
from __future__ import annotations

import importlib
import inspect
from typing import Any

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective


class PublicApi(SphinxDirective):
    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        name = self.arguments[0]
        module = importlib.import_module(name)
        public = getattr(module, "__all__", None)
        if not public:
            raise self.error(f"public-api: {name} has no __all__ to document")
        lines = ["```{eval-rst}", f".. module:: {name}", "   :no-index:", ""]
        for attribute in public:
            value = getattr(module, attribute)
            if inspect.isclass(value):
                lines += [f".. autoclass:: {name}.{attribute}", "   :members:", "   :show-inheritance:", ""]
            elif inspect.isfunction(value):
                lines += [f".. autofunction:: {name}.{attribute}", ""]
            else:
                lines += [f".. autodata:: {name}.{attribute}", "   :no-value:", ""]
        lines.append("```")
        container = nodes.container(classes=["public-api"])
        self.state.nested_parse(StringList(lines, source=self.get_source_info()[0]), self.content_offset, container)
        return list(container.children)


def indented_examples_are_code(app: Sphinx, what: str, name: str, obj: object, options: object,
                               lines: list[str]) -> None:
    """
    The package's docstrings show examples as indented blocks after a blank line, without
    reST's ``::``; make each such block a literal block, as its author meant.
    """
    index = 1
    while index < len(lines) - 1:
        before, blank, after = lines[index - 1], lines[index], lines[index + 1]
        if (blank.strip() == "" and before.strip() and not before.startswith((" ", "-", "*", ":", ".."))
                and not before.rstrip().endswith("::") and after.startswith(" ")):
            lines[index:index + 1] = ["", "::", ""]
            index += 3
        else:
            index += 1


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("public-api", PublicApi)
    app.connect("autodoc-process-docstring", indented_examples_are_code)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
