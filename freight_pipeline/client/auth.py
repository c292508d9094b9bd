"""Bearer tokens: reading one from the token response, and knowing when to renew it.

The spec does not show the token endpoint's fields (assumptions A1/A2). The client sends
``{"username", "password"}`` and accepts the token under ``access_token``, ``token``, ``jwt``,
``id_token`` (or their camelCase forms), a JSON string body, or a bare text body. The expiry comes
from the JWT ``exp`` claim, read WITHOUT verifying the signature (the client cannot and need not
verify it; it only schedules renewal); else from ``expires_in``; else 24 hours (spec).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jwt

TOKEN_FIELDS: tuple[str, ...] = (
    "access_token",
    "token",
    "jwt",
    "id_token",
    "accessToken",
    "idToken",
)
DEFAULT_TOKEN_LIFETIME_S = 24 * 3600.0
# Renew this long before expiry, but never earlier than 10 % of the lifetime before it.
DEFAULT_REFRESH_MARGIN_S = 60.0


class TokenMissing(ValueError):
    """The token response holds no recognisable token (message never contains the body)."""


class TokenBodyBroken(TokenMissing):
    """The token response is neither valid JSON nor a bare token (e.g. cut short): worth asking again."""


@dataclass(frozen=True)
class Token:
    """A bearer token and its expiry (wall-clock epoch seconds). The value is never in ``repr``."""

    value: str = field(repr=False)
    expires_at: float
    issued_at: float

    @property
    def lifetime(self) -> float:
        return max(0.0, self.expires_at - self.issued_at)

    def needs_renewal(self, margin: float = DEFAULT_REFRESH_MARGIN_S, now: float | None = None) -> bool:
        current = time.time() if now is None else now
        effective_margin = min(margin, self.lifetime / 10.0)
        return current >= self.expires_at - effective_margin


# How a JSON body begins; a body beginning so that is not valid JSON is broken, never a bare token.
JSON_OPENERS = ("{", "[", '"')


def _looks_like_token(text: str) -> bool:
    """Whether ``text`` can be a bearer token: visible ASCII (what an ``Authorization`` header carries), no ``<``."""
    return bool(text) and len(text) < 16384 and all("!" <= ch <= "~" for ch in text) and "<" not in text


def _token_in(text: str) -> str | None:
    """The bearer token ``text`` holds, as sent or with its scheme before it (``Bearer eyJ...``, as services that hand
    out the header's value send it); None when it holds none."""
    text = text.strip()
    scheme, _, rest = text.partition(" ")
    if scheme.lower() == "bearer":  # the scheme alone is no token
        text = rest.strip()
    return text if _looks_like_token(text) else None


def extract_token(body: bytes, content_type: str | None = None) -> tuple[str, float | None]:
    """The token and the response's ``expires_in`` (seconds, if any) from a token response body (a UTF-8
    byte-order mark before it, which some services write, is not part of it)."""
    text = body.decode("utf-8", errors="replace").strip().removeprefix("\ufeff").strip()
    data: Any
    try:
        data = json.loads(text) if text else None
    except ValueError:
        if not text.startswith(JSON_OPENERS) and (token := _token_in(text)) is not None:
            return token, None
        raise TokenBodyBroken("the token response is neither valid JSON nor a bare token") from None
    if isinstance(data, str):
        if (token := _token_in(data)) is not None:
            return token, None
        raise TokenMissing("the token response is a JSON string that is not a token")
    if isinstance(data, dict):
        for name in TOKEN_FIELDS:
            value = data.get(name)
            if isinstance(value, str) and (token := _token_in(value)) is not None:
                expires_in = data.get("expires_in", data.get("expiresIn"))
                try:
                    seconds = float(expires_in) if expires_in is not None else None
                except (TypeError, ValueError):
                    seconds = None
                if seconds is not None and (not math.isfinite(seconds) or seconds <= 0):
                    seconds = None
                return token, seconds
        if held := [name for name in TOKEN_FIELDS if data.get(name) is not None]:  # its value never said: a secret
            raise TokenMissing(f"the token response's field {held[0]} holds no bearer token (a "
                               f"{type(data[held[0]]).__name__}, not visible ASCII text without spaces)")
        raise TokenMissing(
            f"the token response has none of the fields {', '.join(TOKEN_FIELDS)} "
            f"(fields present: {', '.join(sorted(map(str, data))) or 'none'})"
        )
    raise TokenMissing(f"the token response is a JSON {type(data).__name__}, not an object or string")


def jwt_expiry(token: str) -> float | None:
    """The ``exp`` claim (epoch seconds) of a JWT, unverified; None for opaque tokens or no claim."""
    try:
        claims = jwt.decode(
            token,
            options={"verify_signature": False, "verify_exp": False, "verify_nbf": False, "verify_iat": False},
        )
    except jwt.PyJWTError:
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    if isinstance(exp, int | float) and not isinstance(exp, bool) and math.isfinite(exp):
        return float(exp)
    return None


def make_token(value: str, expires_in: float | None = None, clock: Callable[[], float] = time.time) -> Token:
    now = clock()
    expires_at = jwt_expiry(value)
    if expires_at is None:
        expires_at = now + (expires_in if expires_in is not None else DEFAULT_TOKEN_LIFETIME_S)
    return Token(value=value, expires_at=expires_at, issued_at=now)
