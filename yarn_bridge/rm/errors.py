"""The errors of the ResourceManager REST client: every failure talking to the RM is an
:class:`RMError`.

* :class:`RMUnavailable`: no active RM answered within the retries and the deadline (connection
  errors, timeouts, 502/503/504, standby RMs), or a submission was cut off after being sent.
* :class:`RMResponseError`: the RM answered, but not in the documented JSON shape.
* :class:`RMHTTPError` and its :class:`RMBadRequest` (400) / :class:`RMAuthError` (401, 403) /
  :class:`RMNotFound` (404): the RM refused the request; Hadoop's ``RemoteException`` name is kept.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "RMAuthError",
    "RMBadRequest",
    "RMError",
    "RMHTTPError",
    "RMNotFound",
    "RMResponseError",
    "RMUnavailable",
]


class RMError(Exception):
    """Base class: something went wrong talking to the ResourceManager.

    ``endpoint`` names the call (``"GET /ws/v1/cluster/apps"``) when known.
    """

    def __init__(self, message: str, *, endpoint: str | None = None) -> None:
        super().__init__(f"{endpoint}: {message}" if endpoint else message)
        self.endpoint = endpoint
        self.detail = message


class RMUnavailable(RMError):
    """No active RM answered within the retries and the deadline. ``attempts`` lists what each
    try saw (``"http://rm1:8088: connection refused"``, ``"...: standby"``)."""

    def __init__(self, message: str, *, endpoint: str | None = None,
                 attempts: Sequence[str] = ()) -> None:  # fmt: skip
        super().__init__(message, endpoint=endpoint)
        self.attempts = tuple(attempts)


class RMResponseError(RMError):
    """The RM answered, but not with the documented shape: undecodable or truncated JSON, a
    missing required key, a wrong type. The message names the endpoint and the field."""


class RMHTTPError(RMError):
    """The RM refused the request (4xx, or a 5xx other than 502/503/504). ``status`` is the
    HTTP code, ``exception`` Hadoop's exception name (``"NotFoundException"``) when given."""

    def __init__(self, message: str, *, endpoint: str | None = None, status: int = 0,
                 exception: str | None = None) -> None:  # fmt: skip
        super().__init__(message, endpoint=endpoint)
        self.status = status
        self.exception = exception


class RMBadRequest(RMHTTPError):
    """400: the RM rejected the request (invalid id, invalid queue configuration, ...)."""


class RMAuthError(RMHTTPError):
    """401 / 403: not authenticated (no ``user.name`` / SPNEGO) or not authorised."""


class RMNotFound(RMHTTPError):
    """404: no such application / node."""
