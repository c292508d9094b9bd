"""Jinja's compiled templates kept across processes: served when the template and the settings that shape
its code are the same, compiled again when either differs, and never a reason to fail."""

from __future__ import annotations

import marshal
from pathlib import Path

import jinja2
import jinja2.nativetypes
import jinja2.sandbox
import pytest

from freight_pipeline.marts.jinja_cache import CACHE_FILE, CompiledTemplates, template_key

TEMPLATE = "{% for x in items %}{{ x | upper }}{% if not loop.last %},{% endif %}{% endfor %}"


@pytest.fixture
def restore_jinja(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's :meth:`CompiledTemplates.install` is undone after it."""
    monkeypatch.setattr(jinja2.Environment, "compile", jinja2.Environment.compile)


def _key(env: jinja2.Environment, source: str = TEMPLATE) -> str:
    return template_key(env, source, None, None, False)


def test_the_key_follows_what_shapes_the_code() -> None:
    plain = _key(jinja2.sandbox.SandboxedEnvironment(extensions=["jinja2.ext.do"]))
    assert plain == _key(jinja2.sandbox.SandboxedEnvironment(extensions=["jinja2.ext.do"]))  # no addresses in it
    assert plain != _key(jinja2.sandbox.SandboxedEnvironment(extensions=["jinja2.ext.do"]), TEMPLATE + " ")
    assert plain != _key(jinja2.sandbox.SandboxedEnvironment())  # an extension less
    assert plain != _key(jinja2.nativetypes.NativeEnvironment(extensions=["jinja2.ext.do"]))  # another generator
    assert plain != _key(jinja2.sandbox.SandboxedEnvironment(extensions=["jinja2.ext.do"], trim_blocks=True))
    passed_context = jinja2.sandbox.SandboxedEnvironment(extensions=["jinja2.ext.do"])
    passed_context.filters["upper"] = jinja2.pass_context(lambda context, value: value)
    assert plain != _key(passed_context)  # the call the code makes depends on what the filter is passed
    finalized = jinja2.sandbox.SandboxedEnvironment(extensions=["jinja2.ext.do"], finalize=str)
    assert plain != _key(finalized)  # every output goes through finalize
    intercepting = jinja2.sandbox.SandboxedEnvironment(extensions=["jinja2.ext.do"])
    intercepting.intercepted_binops = frozenset(["**"])
    assert plain != _key(intercepting)  # the sandbox's calls for these operators are generated


def test_a_new_process_renders_from_the_kept_code_without_compiling(tmp_path: Path, restore_jinja: None) -> None:
    first = CompiledTemplates(tmp_path)
    first.install()
    expected = jinja2.Environment().from_string(TEMPLATE).render(items=["a", "b"])
    assert (expected, first.hits, len(first.new)) == ("A,B", 0, 1)
    first.save(tmp_path / "lock")
    assert first.new == {} and (tmp_path / CACHE_FILE).exists()

    second = CompiledTemplates(tmp_path)  # as the next worker process reads it
    second.install()
    assert jinja2.Environment().from_string(TEMPLATE).render(items=["a", "b"]) == expected
    assert jinja2.Environment().from_string("{{ 1 + 1 }}").render() == "2"
    assert (second.hits, len(second.new)) == (1, 1)
    second.save(tmp_path / "lock")
    assert len(marshal.loads((tmp_path / CACHE_FILE).read_bytes())) == 2  # merged, not replaced


def test_an_unreadable_file_is_started_over(tmp_path: Path, restore_jinja: None) -> None:
    (tmp_path / CACHE_FILE).write_bytes(b"not marshal data")
    templates = CompiledTemplates(tmp_path)
    assert templates.kept == {}
    templates.install()
    assert jinja2.Environment().from_string("{{ 'x' }}").render() == "x"
    templates.save(tmp_path / "lock")
    assert len(marshal.loads((tmp_path / CACHE_FILE).read_bytes())) == 1


def test_a_syntax_error_is_jinjas_own(tmp_path: Path, restore_jinja: None) -> None:
    CompiledTemplates(tmp_path).install()
    with pytest.raises(jinja2.TemplateSyntaxError, match="Unexpected end of template"):
        jinja2.Environment().from_string("{% if x %}")
