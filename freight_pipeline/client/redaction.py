"""Secrets kept out of texts: the placeholder that replaces them, and the password a URL may carry."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit, urlunsplit

REDACTED = "***"


def redact_url(url: str) -> str:
    """``url`` with the password of a ``user:password@`` part replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:{REDACTED}@{host}"))


def url_passwords(url: str) -> list[str]:
    """The password of a ``user:password@`` URL as written and decoded (secrets to scrub from texts)."""
    password = urlsplit(url).password
    return [] if password is None else [password, unquote(password)]
