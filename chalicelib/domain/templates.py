"""Template placeholders: ``{{input}}``, ``{{input.*}}``, ``{{config.*}}``, ``{{secret.*}}``.

Pure functions over JSON values. Resolution walks the JSON tree: a string that is exactly
one placeholder takes the referenced value with its JSON type (numbers stay numbers,
objects stay objects); a placeholder inside a longer string is interpolated as text
(compact JSON for anything but a string). ``config`` and ``secret`` are resolved first, then
``input``, in one pass over the *template* only, so a value coming from input (or config)
that itself looks like ``{{secret.x}}`` is never expanded again.

``{{input}}`` alone names the job's whole input. A job created without input (or with an
empty object) has none: ``{{input}}`` is then null, so a body template that is exactly
``"{{input}}"`` sends no body for it, as an endpoint without a template always did.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from chalicelib.errors import TemplateResolutionFailed

NAMESPACES = ("input", "config", "secret")
#: The namespace a placeholder may name without a path: ``{{input}}`` is the whole input.
WHOLE = "input"
# {{ namespace.path.to.value }} with optional spaces; path segments are identifiers, dashes or
# array indexes. Only {{input}} stands alone: a bare {{word}} stays literal text, as it
# always was (receivers may run templates of their own).
PLACEHOLDER = re.compile(
    r"\{\{\s*(?:([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z0-9_\-.]+?)|(" + WHOLE + r"))\s*\}\}"
)
_EXACT = re.compile(r"^\s*(?:" + PLACEHOLDER.pattern + r")\s*$")


@dataclass(frozen=True)
class Placeholder:
    namespace: str
    path: str  #: "" for the whole namespace (``{{input}}``)

    def __str__(self) -> str:
        dotted = f".{self.path}" if self.path else ""
        return f"{{{{{self.namespace}{dotted}}}}}"


def _placeholder(match: re.Match[str]) -> Placeholder:
    if match.group(3):
        return Placeholder(match.group(3), "")
    return Placeholder(match.group(1), match.group(2))


def whole_placeholder(text: str) -> Placeholder | None:
    """The placeholder ``text`` consists of (spaces around it allowed), else None: such a
    string resolves to the referenced value itself, with its JSON type."""
    exact = _EXACT.match(text)
    return None if exact is None else _placeholder(exact)


def iter_strings(value: Any, where: str = "$") -> Iterator[tuple[str, str]]:
    """Every string in a JSON value with its JSON path (keys included)."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield f"{where}.{key}(key)", str(key)
            yield from iter_strings(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from iter_strings(item, f"{where}[{index}]")


def find_placeholders(value: Any) -> list[tuple[str, Placeholder]]:
    """All placeholders in a template, as (JSON path, placeholder)."""
    found = []
    for where, text in iter_strings(value):
        for match in PLACEHOLDER.finditer(text):
            found.append((where, _placeholder(match)))
    return found


def lookup(data: Any, path: str) -> Any:
    """Follow a dotted path (``user.name``, ``items.0``) through dicts and lists."""
    current = data
    for segment in path.split("."):
        if isinstance(current, Mapping) and segment in current:
            current = current[segment]
        elif isinstance(current, list) and segment.isdigit() and int(segment) < len(current):
            current = current[int(segment)]
        else:
            raise KeyError(path)
    return current


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))


@dataclass(frozen=True)
class TemplateContext:
    """The values placeholders resolve against."""

    input: Mapping[str, Any]
    config: Mapping[str, Any]
    secret: Mapping[str, str]

    def value(self, placeholder: Placeholder) -> Any:
        if not placeholder.path:
            if placeholder.namespace == WHOLE:
                return self.input or None  # no input (none, or {}): null
            raise TemplateResolutionFailed(f"Template variable {placeholder} names no value.")
        source: Mapping[str, Any] | None = {
            "input": self.input,
            "config": self.config,
            "secret": self.secret,
        }.get(placeholder.namespace)
        if source is None:
            raise TemplateResolutionFailed(f"Unknown template namespace in {placeholder}.")
        try:
            return lookup(source, placeholder.path)
        except KeyError:
            raise TemplateResolutionFailed(
                f"Template variable {placeholder} cannot be resolved."
            ) from None


#: A compiled template node. Parts without placeholders compile to None instead, so their
#: parents keep them as they are and skip them at resolution time.
_Node = Callable[[TemplateContext], Any]


def _compile_string(text: str) -> _Node | None:
    whole = whole_placeholder(text)
    if whole is not None:
        return lambda context: context.value(whole)
    parts: list[str | Placeholder] = []
    position = 0
    for match in PLACEHOLDER.finditer(text):
        parts.append(text[position : match.start()])
        parts.append(_placeholder(match))
        position = match.end()
    if not parts:
        return None
    parts.append(text[position:])

    def interpolate(context: TemplateContext) -> str:
        return "".join(
            part if isinstance(part, str) else _as_text(context.value(part)) for part in parts
        )

    return interpolate


def _compile_mapping(template: Mapping[Any, Any]) -> _Node | None:
    items = []
    for key, value in template.items():
        items.append((str(key), _compile_string(str(key)), value, _compile(value)))
    if all(key_node is None and node is None for _, key_node, _, node in items):
        return None

    def build(context: TemplateContext) -> dict[str, Any]:
        out = {}
        for key, key_node, value, node in items:
            resolved_key = key if key_node is None else _as_text(key_node(context))
            out[resolved_key] = value if node is None else node(context)
        return out

    return build


def _compile(template: Any) -> _Node | None:
    if isinstance(template, str):
        return _compile_string(template)
    if isinstance(template, Mapping):
        return _compile_mapping(template)
    if isinstance(template, list):
        nodes = [(item, _compile(item)) for item in template]
        if all(node is None for _, node in nodes):
            return None
        return lambda context: [item if node is None else node(context) for item, node in nodes]
    return None


class Template:
    """A template parsed once; :meth:`resolve` only substitutes (the worker caches these).

    Parts without placeholders are returned as they are (shared between resolutions:
    callers treat resolved values as read-only), which is also what :func:`resolve` returns
    for them apart from the containers it rebuilds.
    """

    def __init__(self, template: Any) -> None:
        self.source = template
        self._node = _compile(template)
        self.secret_names = frozenset(
            p.path.split(".")[0] for _, p in find_placeholders(template) if p.namespace == "secret"
        )

    def resolve(self, context: TemplateContext) -> Any:
        """Same result and errors as :func:`resolve` on the source template."""
        return self.source if self._node is None else self._node(context)


def resolve(template: Any, context: TemplateContext) -> Any:
    """Resolve every placeholder in ``template`` (keys too); raise on any unresolvable one.

    Only the template's own strings are scanned: substituted values are inserted as data and
    never scanned again, so input cannot smuggle in ``{{secret.*}}``.
    """
    return Template(template).resolve(context)


def secret_names(template: Any) -> set[str]:
    """Names of the secrets a template references (the worker decrypts only those)."""
    return {p.path.split(".")[0] for _, p in find_placeholders(template) if p.namespace == "secret"}
