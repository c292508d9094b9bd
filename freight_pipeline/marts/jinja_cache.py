"""Jinja's compiled templates, kept on disk for the next dbt worker process.

dbt renders every macro and node through Jinja, and Jinja turns each template's text into Python code
(parse, generate, ``compile()``) once per process. A dbt worker is a new process every run, so it paid that
again for every macro its build used: 44 % of the CPU of an incremental build's nodes, about a second of
its wall time. The result is a pure function of the template's text and of the environment's settings
that shape the generated code, so it is kept under a digest of both (:func:`template_key`), as Jinja's own
``BytecodeCache`` keeps the templates of a loader (dbt compiles from strings, which that cache does not see).

Only the worker process installs it (:meth:`CompiledTemplates.install`), and saves what it compiled anew at
the end of its command (:meth:`CompiledTemplates.save`, under the parse folder's lock, merged with what
other workers saved meanwhile). A file that cannot be read is started over; one of the wrong Python
(marshal's format) is keyed out by :data:`MAGIC`. ``DBT_MACRO_DEBUGGING`` (dbt writes each template's code
to a file of its own) turns it off. The file is trusted as the project's ``__pycache__`` is: code, in the
project's own ``target/`` folder (or the data directory's, for a project that cannot be written).
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import marshal
import os
from collections.abc import Callable
from pathlib import Path
from types import CodeType
from typing import Any

CACHE_FILE = "jinja-code.marshal"
MAX_TEMPLATES = 20_000
"""More than this in the file (a project edited many times over): it is started over."""
MAGIC = importlib.util.MAGIC_NUMBER.hex()
"""Python's bytecode version: code objects are kept for the interpreter that made them."""
_LEXER_SETTINGS = ("block_start_string", "block_end_string", "variable_start_string", "variable_end_string",
                   "comment_start_string", "comment_end_string", "line_statement_prefix", "line_comment_prefix",
                   "trim_blocks", "lstrip_blocks", "newline_sequence", "keep_trailing_newline", "optimized",
                   "is_async")


def _named(value: Any) -> str:
    """A stable name for a setting: the value itself when plain, else its qualified name (never an address)."""
    if value is None or isinstance(value, str | int | bool | float):
        return repr(value)
    kind = value if isinstance(value, type) else getattr(value, "__func__", value)
    return f"{getattr(kind, '__module__', '?')}.{getattr(kind, '__qualname__', type(value).__qualname__)}"


def _arguments(functions: dict[str, Any]) -> list[tuple[str, str]]:
    """Each filter's or test's name and what it is passed (context, environment...): the generated call
    depends on both (``CodeGenerator._filter_test_common``)."""
    return sorted((name, repr(getattr(function, "jinja_pass_arg", None))) for name, function in functions.items())


def template_key(env: Any, source: str, name: str | None, filename: str | None, defer_init: bool) -> str:
    """The digest of everything Jinja's code for ``source`` depends on in ``env``."""
    import jinja2

    finalize = None if env.finalize is None else repr(getattr(env.finalize, "jinja_pass_arg", None))
    settings = [MAGIC, jinja2.__version__, _named(type(env)), _named(env.code_generator_class),
                sorted(env.extensions), _named(env.autoescape), finalize, env.sandboxed,
                sorted(getattr(env, "intercepted_binops", ())), sorted(getattr(env, "intercepted_unops", ())),
                [repr(getattr(env, setting)) for setting in _LEXER_SETTINGS],
                _arguments(env.filters), _arguments(env.tests), name, filename, defer_init]
    digest = hashlib.sha256(repr(settings).encode())
    digest.update(source.encode())
    return digest.hexdigest()


class CompiledTemplates:
    """The code of the templates compiled before, read from ``folder`` (:data:`CACHE_FILE`), and of those
    compiled by this process (:attr:`new`)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / CACHE_FILE
        self.kept: dict[str, CodeType] = _read(self.path)
        self.new: dict[str, CodeType] = {}
        self.hits = 0

    def install(self) -> None:
        """Make every Jinja environment of this process compile through this cache (unless dbt's macro
        debugging is on: it wants each template's code written by its own compile)."""
        import jinja2
        from jinja2.utils import internalcode

        if os.environ.get("DBT_MACRO_DEBUGGING"):
            return
        original: Callable[..., Any] = jinja2.Environment.compile
        templates = self

        @internalcode
        def compile(env: Any, source: Any, name: str | None = None, filename: str | None = None,
                    raw: bool = False, defer_init: bool = False) -> Any:
            if raw or not isinstance(source, str):
                return original(env, source, name, filename, raw, defer_init)
            key = template_key(env, source, name, filename, defer_init)
            code = templates.kept.get(key) or templates.new.get(key)
            if code is not None:
                templates.hits += 1
                return code
            code = original(env, source, name, filename, raw, defer_init)
            templates.new[key] = code
            return code

        jinja2.Environment.compile = compile  # type: ignore[method-assign]

    def save(self, lock: Path) -> None:
        """Add what this process compiled to the file, merged with what others saved since it was read
        (under ``lock``, the parse folder's); a failure to write leaves the next process to compile again."""
        if not self.new:
            return
        try:
            with open(lock, "a+") as held:
                fcntl.flock(held.fileno(), fcntl.LOCK_EX)
                merged = _read(self.path)
                if len(merged) + len(self.new) > MAX_TEMPLATES:
                    merged = {}
                merged.update(self.new)
                partial = self.path.with_name(f"{CACHE_FILE}.{os.getpid()}.tmp")
                partial.write_bytes(marshal.dumps(merged))
                partial.replace(self.path)
        except OSError:
            return
        self.kept.update(self.new)
        self.new = {}


def _read(path: Path) -> dict[str, CodeType]:
    """The templates kept at ``path``; none when it is missing, unreadable or of another Python."""
    try:
        kept = marshal.loads(path.read_bytes())
    except (OSError, ValueError, EOFError, TypeError):
        return {}
    if not isinstance(kept, dict):
        return {}
    return {key: code for key, code in kept.items() if isinstance(key, str) and isinstance(code, CodeType)}
