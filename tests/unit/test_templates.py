"""Template placeholders: parsing, typed and interpolated resolution, no re-expansion."""

from __future__ import annotations

import pytest

from chalicelib.domain.templates import (
    Placeholder,
    Template,
    TemplateContext,
    find_placeholders,
    lookup,
    resolve,
    secret_names,
    whole_placeholder,
)
from chalicelib.errors import TemplateResolutionFailed

CONTEXT = TemplateContext(
    input={"user": {"id": "u_1", "tags": ["a", "b"]}, "n": 3, "flag": True, "obj": {"k": 1}},
    config={"base": "https://api.example", "max_len": 100000},
    secret={"token": "sk-live"},
)


def test_find_placeholders_with_paths_including_keys_and_spaces() -> None:
    template = {
        "url": "{{config.base}}/x/{{ input.user.id }}",
        "{{secret.token}}": ["{{input.n}}"],
    }
    found = {(where, str(p)) for where, p in find_placeholders(template)}
    assert found == {
        ("$.url", "{{config.base}}"),
        ("$.url", "{{input.user.id}}"),
        ("$.{{secret.token}}(key)", "{{secret.token}}"),
        ("$.{{secret.token}}[0]", "{{input.n}}"),
    }
    assert Placeholder("input", "a.b").namespace == "input"


def test_exact_placeholders_keep_their_json_type() -> None:
    assert resolve("{{input.n}}", CONTEXT) == 3
    assert resolve(" {{input.flag}} ", CONTEXT) is True
    assert resolve("{{input.obj}}", CONTEXT) == {"k": 1}
    assert resolve("{{config.max_len}}", CONTEXT) == 100000


def test_placeholders_inside_text_are_interpolated() -> None:
    assert resolve("{{config.base}}/users/{{input.user.id}}", CONTEXT) == (
        "https://api.example/users/u_1"
    )
    assert resolve("n={{input.n}} obj={{input.obj}}", CONTEXT) == 'n=3 obj={"k":1}'
    assert resolve("Bearer {{secret.token}}", CONTEXT) == "Bearer sk-live"


def test_nested_paths_lists_and_keys() -> None:
    template = {"{{input.user.id}}": ["{{input.user.tags.1}}", 5, None], "plain": "text"}
    assert resolve(template, CONTEXT) == {"u_1": ["b", 5, None], "plain": "text"}
    assert lookup({"a": [{"b": 1}]}, "a.0.b") == 1


@pytest.mark.parametrize(
    "template",
    [
        "{{input.missing}}",
        "x{{config.nope}}",
        "{{secret.other}}",
        "{{input.user.tags.9}}",
        "{{env.HOME}}",
        "{{input.n.deeper}}",
    ],
)
def test_unresolvable_placeholders_fail(template: str) -> None:
    with pytest.raises(TemplateResolutionFailed):
        resolve({"a": template}, CONTEXT)


def test_values_are_never_expanded_again() -> None:
    context = TemplateContext(
        input={"evil": "{{secret.token}}"}, config={"c": "{{input.evil}}"}, secret={"token": "s"}
    )
    assert resolve("{{input.evil}}", context) == "{{secret.token}}"
    assert resolve("x {{config.c}}", context) == "x {{input.evil}}"


def test_text_that_is_not_a_placeholder_is_left_alone() -> None:
    # A bare {{word}} other than {{input}} stays text: receivers may run templates of their own.
    for text in ("{{}}", "{{name}}", "{{config}}", "{ {input.x} }", "{{1bad.x}}"):
        assert resolve(text, CONTEXT) == text


def test_bare_input_is_the_whole_input_with_its_json_type() -> None:
    assert resolve("{{input}}", CONTEXT) == CONTEXT.input
    assert resolve(" {{ input }} ", CONTEXT) == CONTEXT.input
    template = {"data": "{{input}}", "user": "{{input.user}}", "n": "{{input.n}}"}
    assert resolve(template, CONTEXT) == {
        "data": CONTEXT.input,
        "user": {"id": "u_1", "tags": ["a", "b"]},
        "n": 3,
    }
    assert resolve("in={{input.user}}", CONTEXT) == 'in={"id":"u_1","tags":["a","b"]}'
    assert [str(p) for _, p in find_placeholders({"b": "{{ input }}"})] == ["{{input}}"]
    assert whole_placeholder(" {{input}} ") == Placeholder("input", "")
    assert whole_placeholder("{{input}} and more") is None


@pytest.mark.parametrize("no_input", [{}, None])
def test_bare_input_of_a_job_without_input_is_null(no_input: dict | None) -> None:
    context = TemplateContext(input=no_input or {}, config={}, secret={})
    assert resolve("{{input}}", context) is None
    assert resolve({"data": "{{input}}"}, context) == {"data": None}
    with pytest.raises(TemplateResolutionFailed):
        resolve("{{input.x}}", context)


def test_secret_names() -> None:
    template = {
        "h": "Bearer {{secret.a}}",
        "b": ["{{ secret.b }}", "{{secret.a}}"],
        "u": "{{config.x}}",
    }
    assert secret_names(template) == {"a", "b"}


def test_a_compiled_template_resolves_like_resolve_for_every_context() -> None:
    source = {
        "url": "{{config.base}}/u/{{input.user.id}}",
        "{{secret.token}}": ["{{input.n}}", "plain", {"k": "{{input.flag}}"}],
        "static": {"a": [1, "b"]},
        "n": 5,
    }
    template = Template(source)
    other = TemplateContext(
        input={"user": {"id": "u_2"}, "n": 7, "flag": False},
        config={"base": "http://b"},
        secret={"token": "t2"},
    )
    for context in (CONTEXT, other):
        assert template.resolve(context) == resolve(source, context)
    assert template.secret_names == {"token"}
    assert Template({"a": ["x"]}).resolve(CONTEXT) == {"a": ["x"]}


def test_a_compiled_template_raises_like_resolve() -> None:
    template = Template({"a": "{{input.user.id}}", "b": "x {{input.missing}}"})
    with pytest.raises(TemplateResolutionFailed, match=r"\{\{input.missing\}\}"):
        template.resolve(CONTEXT)
