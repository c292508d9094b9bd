"""Users, bearer tokens (JWT HS256 via pyjwt), endpoint permissions and webhook basic auth.

Assumptions A1, A2, A16 and A17 of docs/assumptions.md. Token expiry is judged on the
real wall clock (not the store's simulated clock), so a short ``token_lifetime_s`` makes tokens
expire in tests. Passwords and tokens are never logged nor put into error messages.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import math
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

import jwt

from freight_pipeline.simulator.config import SimulatorConfig, UserConfig

ALGORITHM = "HS256"
VERIFIED_KEPT = 1024
"""Tokens whose checked claims are kept (all forgotten when there are more)."""


class AuthError(Exception):
    """401 or 403; ``message`` says what was wrong (never the secret itself)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def _unauthorized(message: str, scheme: str = "Bearer") -> AuthError:
    return AuthError(401, message, {"WWW-Authenticate": f'{scheme} realm="freight-simulator"'})


class Authenticator:
    """Issues and checks tokens for the configured users. Thread-safe."""

    def __init__(self, config: SimulatorConfig, clock: Callable[[], float] = time.time) -> None:
        self._users = {u.username: u for u in config.users}
        self._secret = config.jwt_secret
        self._clock = clock
        self._lock = threading.Lock()
        self.token_lifetime_s = float(config.token_lifetime_s)
        self._verified: dict[tuple[str, str], tuple[str, float, float]] = {}
        """(secret, token) -> (its user's name, its expiry, its ``nbf`` or 0) of tokens whose signature was checked: a
        client sends the same token with every request, and checking it again was a fifth of the simulator's CPU."""

    # --- tokens ---------------------------------------------------------------------------------

    def issue_token(self, body: Any, not_before_s: float = 0.0) -> dict[str, Any]:
        """Check the A1 body and answer the A2 response. Raises ValueError (400) or AuthError (401).
        ``not_before_s``: the token is refused until this long after now (its ``nbf`` claim)."""
        if not isinstance(body, dict):
            raise ValueError("token request body must be a JSON object with username and password")
        username, password = body.get("username"), body.get("password")
        for name, value in (("username", username), ("password", password)):
            if not isinstance(value, str) or not value:
                raise ValueError(f"{name} is required and must be a non-empty string")
        user = self.check_password(username, password)
        if user is None:
            raise _unauthorized("bad credentials: unknown user or wrong password")
        now = self._clock()
        lifetime = self.token_lifetime_s
        claims: dict[str, Any] = {"sub": user.username, "iat": int(now), "exp": math.ceil(now + lifetime),
                                  "jti": secrets.token_hex(8)}
        if not_before_s > 0:
            claims["nbf"] = now + not_before_s
        with self._lock:
            token = jwt.encode(claims, self._secret, algorithm=ALGORITHM)
        return {"access_token": token, "token_type": "Bearer", "expires_in": math.ceil(lifetime)}

    def check_password(self, username: str, password: str) -> UserConfig | None:
        user = self._users.get(username)
        expected = user.password if user is not None else "\0" * 16
        ok = hmac.compare_digest(password.encode(), expected.encode())
        return user if ok and user is not None else None

    def revoke_all_tokens(self) -> None:
        """Invalidate every token issued so far (the signing secret changes)."""
        with self._lock:
            self._secret = secrets.token_hex(32)
            self._verified.clear()

    # --- checks ---------------------------------------------------------------------------------

    def bearer_user(self, authorization: str | None) -> UserConfig:
        if not authorization:
            raise _unauthorized("missing bearer token: send 'Authorization: Bearer <token>'")
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise _unauthorized("malformed Authorization header: expected 'Bearer <token>'")
        with self._lock:
            secret = self._secret
            verified = self._verified.get((secret, token))
        if verified is None:
            verified = self._verify(token, secret)
        subject, expires, not_before = verified
        if expires <= max(self._clock(), time.time()):  # expired on the real clock (as pyjwt judges) or this one
            raise _unauthorized("token expired: request a new one at /auth/token")
        if not_before > time.time():  # judged here, to the fraction of a second (pyjwt reads whole seconds)
            raise _unauthorized("invalid token: not valid yet")
        user = self._users.get(subject)
        if user is None:
            raise _unauthorized("invalid token: unknown user")
        return user

    def _verify(self, token: str, secret: str) -> tuple[str, float, float]:
        """The subject, expiry and ``nbf`` (0 without) of ``token`` signed with ``secret``, kept once its signature
        checked."""
        try:
            claims = jwt.decode(
                token,
                secret,
                algorithms=[ALGORITHM],
                options={"require": ["exp", "sub"], "verify_nbf": False},
                leeway=0,
            )
        except jwt.ExpiredSignatureError:
            raise _unauthorized("token expired: request a new one at /auth/token") from None
        except jwt.InvalidTokenError:
            raise _unauthorized("invalid token: malformed, badly signed or revoked") from None
        verified = (str(claims["sub"]), float(claims["exp"]), float(claims.get("nbf", 0.0)))
        with self._lock:
            if len(self._verified) >= VERIFIED_KEPT:
                self._verified.clear()
            self._verified[(secret, token)] = verified
        return verified

    @staticmethod
    def require_permission(user: UserConfig, permission: str) -> None:
        if not user.allows(permission):
            raise AuthError(403, f"user {user.username!r} lacks permission {permission!r} for this endpoint")

    def basic_user(self, authorization: str | None, role: str) -> UserConfig:
        if not authorization:
            raise _unauthorized("missing basic credentials: send 'Authorization: Basic <base64>'", "Basic")
        scheme, _, encoded = authorization.strip().partition(" ")
        if scheme.lower() != "basic" or not encoded.strip():
            raise _unauthorized("malformed Authorization header: expected 'Basic <base64>'", "Basic")
        try:
            decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            raise _unauthorized("malformed basic credentials: not base64 of 'user:password'", "Basic") from None
        username, sep, password = decoded.partition(":")
        user = self.check_password(username, password) if sep else None
        if user is None:
            raise _unauthorized("bad credentials: unknown user or wrong password", "Basic")
        if role not in user.roles:
            raise AuthError(403, f"user {user.username!r} lacks role {role!r}")
        return user
