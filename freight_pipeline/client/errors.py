"""One exception hierarchy for everything the client can fail with.

::

    FreightError
    ├── APIStatusError                 the service answered with an error status (itself: 3xx)
    │   ├── BadRequestError            400 and other 4xx without a class of their own (405, 422, ...)
    │   ├── AuthenticationError        401, or the token endpoint refused the credentials
    │   ├── PermissionDeniedError      403
    │   ├── NotFoundError              404
    │   ├── ConflictError              409
    │   ├── RateLimitedError           429 (``retry_after`` in seconds when the service sent one)
    │   └── ServerError                5xx
    ├── ProtocolError                  a 2xx whose body is not what the endpoint promises
    ├── FreightTimeoutError            also a builtin ``TimeoutError``
    └── FreightConnectionError         also a builtin ``ConnectionError`` (refused, reset, dropped)

Messages name the endpoint (method and path) and never carry a password or token: the client
redacts its secrets from any text it puts into an exception.
"""

from __future__ import annotations

BODY_EXCERPT_CHARS = 200


class FreightError(Exception):
    """Base of every client error. ``method``/``path`` name the request (path with its ids)."""

    def __init__(self, message: str, *, method: str | None = None, path: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.method = method
        self.path = path

    def __str__(self) -> str:
        return self.message


class APIStatusError(FreightError):
    """The service answered ``status_code``; ``detail`` is its message or a body excerpt."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        method: str | None = None,
        path: str | None = None,
        detail: str | None = None,
    ) -> None:
        super().__init__(message, method=method, path=path)
        self.status_code = status_code
        self.detail = detail


class BadRequestError(APIStatusError):
    pass


class AuthenticationError(APIStatusError):
    pass


class PermissionDeniedError(APIStatusError):
    pass


class NotFoundError(APIStatusError):
    pass


class ConflictError(APIStatusError):
    pass


class RateLimitedError(APIStatusError):
    def __init__(
        self,
        message: str,
        *,
        status_code: int = 429,
        method: str | None = None,
        path: str | None = None,
        detail: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, status_code=status_code, method=method, path=path, detail=detail)
        self.retry_after = retry_after


class ServerError(APIStatusError):
    pass


class ProtocolError(FreightError):
    """A success status whose body is not the JSON the endpoint promises (or a token is missing)."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        method: str | None = None,
        path: str | None = None,
        body_excerpt: str = "",
    ) -> None:
        super().__init__(message, method=method, path=path)
        self.status_code = status_code
        self.body_excerpt = body_excerpt


class FreightTimeoutError(FreightError, TimeoutError):
    pass


class FreightConnectionError(FreightError, ConnectionError):
    pass


def error_class_for_status(status: int) -> type[APIStatusError]:
    if status == 401:
        return AuthenticationError
    if status == 403:
        return PermissionDeniedError
    if status == 404:
        return NotFoundError
    if status == 409:
        return ConflictError
    if status == 429:
        return RateLimitedError
    if status >= 500:
        return ServerError
    if status >= 400:
        return BadRequestError
    return APIStatusError  # an unexpected 1xx/3xx (redirects are not followed)
