"""Secrets kept out of texts: the placeholder that replaces them, and the password a URL may carry."""

from __future__ import annotations

import json
from urllib.parse import quote, quote_plus, unquote, urlsplit, urlunsplit

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


def written_forms(secret: str) -> list[str]:
    """``secret`` as written and as a service may echo it: JSON-escaped (``\\"``, ``\\u00e4``, ``\\/``, control
    characters) and percent-encoded (a form or query), each a text to scrub."""
    escaped = [json.dumps(secret, ensure_ascii=ascii_only)[1:-1] for ascii_only in (False, True)]
    forms = [secret, *escaped, *(form.replace("/", "\\/") for form in escaped),
             quote(secret, safe=""), quote_plus(secret, safe="")]
    return list(dict.fromkeys(forms))
