"""
The ``public-api`` directive: autodoc of every name in a module's ``__all__``, under the
public name (``kopf_outcomes.Pending``, not where it is defined), so that the reference
follows the package's own list of public names as it changes.

    ```{public-api} kopf_outcomes
    :first: install, Success, recall
    :members: PluginManager=register, unregister
    ```

``:first:`` names come first, in that order (the page is ordered by use); the rest follow in
``__all__`` order. ``:members:`` limits the documented members of a class (``Name=a, b; Other=c``).
"""
from __future__ import annotations

import importlib
import inspect
from typing import Any

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective


def _names(text: str | None) -> list[str]:
    return [n.strip() for n in (text or "").split(",") if n.strip()]


def _members(text: str | None) -> dict[str, list[str]]:
    pairs = (item.split("=", 1) for item in (text or "").split(";") if item.strip())
    return {name.strip(): _names(members) for name, members in pairs}


class PublicApi(SphinxDirective):
    required_arguments = 1
    option_spec = {"first": directives.unchanged, "members": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        name = self.arguments[0]
        module = importlib.import_module(name)
        public = getattr(module, "__all__", None)
        if not public:
            raise self.error(f"public-api: {name} has no __all__ to document")
        first = _names(self.options.get("first"))
        unknown = [n for n in first if n not in public]
        if unknown:
            raise self.error(f"public-api: {name}.__all__ has no {unknown}")
        members = _members(self.options.get("members"))
        lines = ["```{eval-rst}", f".. module:: {name}", "   :no-index:", ""]
        for attribute in [*first, *(n for n in public if n not in first)]:
            value = getattr(module, attribute)
            if inspect.isclass(value):
                listed = ", ".join(members.get(attribute, []))
                lines += [f".. autoclass:: {name}.{attribute}", f"   :members: {listed}".rstrip(),
                          "   :show-inheritance:", ""]
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


def first_result_is_marked(app: Sphinx, what: str, name: str, obj: object, options: object,
                           lines: list[str]) -> None:
    """Hook specifications with ``firstresult=True`` say so first, as pluggy's own docs do."""
    spec = getattr(obj, "kopf_outcomes_spec", None)
    if isinstance(spec, dict) and spec.get("firstresult"):
        lines[:0] = ["**First result:** the first plugin that returns something other than ``None`` decides;"
                     " the plugins after it are not called (``firstresult=True``).", ""]


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("public-api", PublicApi)
    app.connect("autodoc-process-docstring", indented_examples_are_code)
    app.connect("autodoc-process-docstring", first_result_is_marked)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
