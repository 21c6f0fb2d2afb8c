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

A template can repeat a placeholder, so its output can be far larger than template and
input together. :meth:`Template.resolve` with a ``limit`` counts the output's size (as
compact JSON) while it resolves and raises :class:`RenderTooLarge` as soon as the count
passes the limit: a placeholder's value is measured before anything is built from it, so
what is allocated stays near the limit whatever the template's fan-out.
"""

from __future__ import annotations

import json
import math
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


def json_size(value: Any) -> int:
    """Characters of ``value`` as compact JSON (ASCII, as the dispatchers encode it).

    Scalars other than strings are measured without encoding them (every delivery measures
    its placeholders' values: most are numbers): JSON writes them as Python prints them."""
    if value is None or value is True:
        return 4
    if value is False:
        return 5
    if type(value) is int or (type(value) is float and math.isfinite(value)):
        return len(repr(value))
    return len(json.dumps(value, separators=(",", ":")))


class RenderTooLarge(Exception):
    """The resolved template would pass ``limit`` (compact JSON characters): resolution
    stopped there, before the output was built."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the rendered request exceeds the limit of {limit} bytes")
        self.limit = limit


class _Budget:
    """The running size of one resolution's output; ``limit`` None counts nothing.

    A value's size is measured once per resolution (a placeholder repeated 500 times is
    measured once): values are keyed by identity, and the context keeps them alive.
    """

    __slots__ = ("_left", "_sizes", "limit")

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self._left = 0 if limit is None else limit
        self._sizes: dict[tuple[int, bool], int] = {}

    def spend(self, size: int) -> None:
        if self.limit is None:
            return
        self._left -= size
        if self._left < 0:
            raise RenderTooLarge(self.limit)

    def value(self, value: Any) -> Any:
        """``value`` as a whole JSON value of the output, paid for."""
        if self.limit is not None:
            self.spend(self._measure(value))
        return value

    def text(self, value: Any) -> str:
        """``value`` as text inside a string of the output, paid for before it is built."""
        if self.limit is not None:
            self.spend(self._measure(value, inside_text=True))
        return _as_text(value)

    def _measure(self, value: Any, *, inside_text: bool = False) -> int:
        key = (id(value), inside_text)
        size = self._sizes.get(key)
        if size is None:
            # Inside a string, the text is escaped once more, without its own quotes.
            size = json_size(_as_text(value)) - 2 if inside_text else json_size(value)
            if isinstance(value, str | Mapping | list):  # scalars are cheap and short-lived
                self._sizes[key] = size
        return size


@dataclass(frozen=True)
class TemplateContext:
    """The values placeholders resolve against."""

    input: Any  #: the job's input: any JSON value
    config: Mapping[str, Any]
    secret: Mapping[str, str]

    def value(self, placeholder: Placeholder) -> Any:
        if not placeholder.path:
            if placeholder.namespace == WHOLE:
                # No input (none, or {}): null. Any other value (0, "", [] too) is itself.
                return None if self.input is None or self.input == {} else self.input
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


#: A compiled template node: it resolves its part of the template and pays for the JSON
#: it contributes. Parts without placeholders compile to None instead, so their parents
#: keep them as they are (paying their size, measured once when compiled).
_Node = Callable[[TemplateContext, _Budget], Any]


def _parts(text: str) -> list[str | Placeholder]:
    """``text`` as its literal parts and placeholders, in order (literal first and last,
    so one part alone means no placeholder)."""
    parts: list[str | Placeholder] = []
    position = 0
    for match in PLACEHOLDER.finditer(text):
        parts.append(text[position : match.start()])
        parts.append(_placeholder(match))
        position = match.end()
    parts.append(text[position:])
    return parts


def _compile_string(text: str) -> _Node | None:
    whole = whole_placeholder(text)
    if whole is not None:
        return lambda context, budget: budget.value(context.value(whole))
    parts = _parts(text)
    if len(parts) == 1:
        return None
    # The literal parts' escaped size and the string's quotes.
    fixed = 2 + sum(json_size(part) - 2 for part in parts if isinstance(part, str))

    def interpolate(context: TemplateContext, budget: _Budget) -> str:
        budget.spend(fixed)
        return "".join(
            part if isinstance(part, str) else budget.text(context.value(part)) for part in parts
        )

    return interpolate


def _compile_text(text: str, encode: Callable[[str], str]) -> _Node:
    """A string rendered as text (a form, XML or plain text body): every placeholder, a
    lone one too, becomes its value as text (compact JSON for anything but a string)
    passed through ``encode``. Paid for as it is built: the value's text before it is
    encoded, then what encoding added, so a repeated placeholder stops at the limit."""
    parts = _parts(text)
    fixed = 2 + sum(len(part) for part in parts if isinstance(part, str))

    def render(context: TemplateContext, budget: _Budget) -> str:
        budget.spend(fixed)
        out = []
        for part in parts:
            if isinstance(part, str):
                out.append(part)
                continue
            raw = _as_text(context.value(part))
            budget.spend(len(raw))
            encoded = encode(raw)
            budget.spend(len(encoded) - len(raw))
            out.append(encoded)
        return "".join(out)

    return render


def _compile_key(text: str) -> _Node | None:
    """A key is always text: a key that is one placeholder takes its value as text (compact
    JSON for anything but a string), paid for as the quoted string it becomes."""
    whole = whole_placeholder(text)
    if whole is None:
        return _compile_string(text)

    def as_text(context: TemplateContext, budget: _Budget) -> str:
        budget.spend(2)  # the key's quotes
        return budget.text(context.value(whole))

    return as_text


def _compile_mapping(
    template: Mapping[Any, Any], compiled: Mapping[str, _Node] | None = None
) -> _Node | None:
    """``compiled``: nodes already made for some of the values, by key."""
    items = []
    fixed = 1 + 2 * len(template)  # braces, one colon per item and the commas between
    for key, value in template.items():
        node = (compiled or {}).get(str(key))
        key_node, node = _compile_key(str(key)), node or _compile(value)
        fixed += (json_size(str(key)) if key_node is None else 0) + (
            json_size(value) if node is None else 0
        )
        items.append((str(key), key_node, value, node))
    if all(key_node is None and node is None for _, key_node, _, node in items):
        return None

    def build(context: TemplateContext, budget: _Budget) -> dict[str, Any]:
        budget.spend(fixed)
        out = {}
        for key, key_node, value, node in items:
            resolved_key = key if key_node is None else _as_text(key_node(context, budget))
            out[resolved_key] = value if node is None else node(context, budget)
        return out

    return build


def _compile_list(template: list[Any]) -> _Node | None:
    nodes = [(item, _compile(item)) for item in template]
    if all(node is None for _, node in nodes):
        return None
    # Brackets, commas and the items without placeholders.
    fixed = 1 + len(nodes) + sum(json_size(item) for item, node in nodes if node is None)

    def build(context: TemplateContext, budget: _Budget) -> list[Any]:
        budget.spend(fixed)
        return [item if node is None else node(context, budget) for item, node in nodes]

    return build


def _compile(template: Any) -> _Node | None:
    if isinstance(template, str):
        return _compile_string(template)
    if isinstance(template, Mapping):
        return _compile_mapping(template)
    if isinstance(template, list):
        return _compile_list(template)
    return None


class Template:
    """A template parsed once; :meth:`resolve` only substitutes (the worker caches these).

    Parts without placeholders are returned as they are (shared between resolutions:
    callers treat resolved values as read-only), which is also what :func:`resolve` returns
    for them apart from the containers it rebuilds.
    """

    def __init__(self, template: Any, *, text_body: Callable[[str], str] | None = None) -> None:
        """``text_body``: the spec's ``body_template`` is a string rendered as text, each
        value through this encoder (:mod:`chalicelib.domain.body_text`)."""
        self.source = template
        self.text_body = False
        if text_body is not None and isinstance(template, Mapping):
            body = template.get("body_template")
            if isinstance(body, str):
                self.text_body = True
                text = {"body_template": _compile_text(body, text_body)}
                self._node = _compile_mapping(template, text)
        if not self.text_body:
            self._node = _compile(template)
        self._size = json_size(template) if self._node is None else 0
        self.secret_names = frozenset(
            p.path.split(".")[0] for _, p in find_placeholders(template) if p.namespace == "secret"
        )

    def resolve(self, context: TemplateContext, *, limit: int | None = None) -> Any:
        """Same result and errors as :func:`resolve` on the source template.

        ``limit``: the most characters the result may take as compact JSON; past it
        :class:`RenderTooLarge` is raised as soon as the running count passes it, before
        the rest is resolved (no limit: nothing is counted).
        """
        budget = _Budget(limit)
        if self._node is None:
            budget.spend(self._size)
            return self.source
        return self._node(context, budget)


def resolve(template: Any, context: TemplateContext) -> Any:
    """Resolve every placeholder in ``template`` (keys too); raise on any unresolvable one.

    Only the template's own strings are scanned: substituted values are inserted as data and
    never scanned again, so input cannot smuggle in ``{{secret.*}}``.
    """
    return Template(template).resolve(context)


def secret_names(template: Any) -> set[str]:
    """Names of the secrets a template references (the worker decrypts only those)."""
    return {p.path.split(".")[0] for _, p in find_placeholders(template) if p.namespace == "secret"}
