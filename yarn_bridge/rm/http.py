"""The HTTP layer of the ResourceManager REST client: one request to ``/ws/v1/cluster/...``
sent to the active RM of an HA pair, with retries, auth and error mapping
(:class:`RMTransport`, the base of :class:`~yarn_bridge.rm.client.RMClient`).

* **RM HA**: the client is given every RM URL and remembers the active one. A standby RM
  answers REST calls with ``307`` + ``Location`` (Hadoop 2.8+ ``RMWebAppFilter``) or with a
  ``200`` text page "This is standby RM. Redirecting to the current active RM: <url>" plus a
  ``Refresh`` header (older RMs, or when it does not know the active); ``/ws/v1/cluster/info`` is
  never redirected and reports ``haState`` (the caller passes a ``check`` that recognises it).
  All three are handled: a named target is tried next (and learned if it was not in the list),
  otherwise the next configured RM.
* **Retries**: a *round* tries every RM once; connection errors, timeouts, 502/503/504 and
  standby answers move to the next RM; after a failed round the client sleeps
  ``backoff * 2**k`` (capped at ``max_backoff``, no jitter so tests are deterministic) and tries
  again, up to ``max_attempts`` rounds and never past ``deadline`` seconds per call (each
  request's timeout is clipped to what is left; the rounds are an :class:`arbiter.retry.Retry`
  loop). Then
  :class:`~yarn_bridge.rm.errors.RMUnavailable`. A non-idempotent request (``POST /apps``) is
  re-sent only when it never reached the RM (connection refused, connect timeout, a standby or a
  503): after a read timeout or a cut connection the RM may have accepted it.
* **Auth**: ``user=`` adds Hadoop simple auth's ``user.name`` query parameter; the RM's
  ``hadoop.auth`` cookie is kept by the httpx client. ``auth=`` is an :data:`AuthHook`
  ``(method, url) -> headers`` (SPNEGO, :mod:`yarn_bridge.kerberos`), called for every attempt
  until the RM has set its signed ``hadoop.auth`` cookie; then a request goes with the cookie
  alone (the RM skips its SPNEGO check: 1.2 ms rather than 5.7 ms a call on the local RM), and a
  401 to it (expired, or another RM's) is re-sent at once with the hook's headers.
  A 401 with ``WWW-Authenticate: Negotiate`` says the RM wants Kerberos, and whether the client
  sent none or was refused.
* **Errors**: a 4xx (or a 5xx other than 502/503/504) becomes an
  :class:`~yarn_bridge.rm.errors.RMHTTPError` subclass carrying Hadoop's ``RemoteException``;
  undecodable JSON an :class:`~yarn_bridge.rm.errors.RMResponseError`. Malformed answers are not
  retried (a retry would hide a real incompatibility).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Self

import httpx

from arbiter.retry import Backoff, Retry
from yarn_bridge.rm.errors import (
    RMAuthError,
    RMBadRequest,
    RMHTTPError,
    RMNotFound,
    RMResponseError,
    RMUnavailable,
)

__all__ = ["STANDBY_MARKER", "AuthHook", "RMTransport"]

STANDBY_MARKER: Final = "This is standby RM"
AUTH_COOKIE: Final = "hadoop.auth"  # Hadoop's AuthenticationFilter: signed, after a SPNEGO 200

# (method, url) -> extra headers for this attempt (e.g. SPNEGO "Authorization: Negotiate ...").
AuthHook = Callable[[str, str], Mapping[str, str]]


def _base(url: str) -> str:
    url = url.strip().rstrip("/")
    if "://" not in url:
        url = "http://" + url
    return url


def _split_urls(urls: str | Iterable[str]) -> list[str]:
    items = urls.split(",") if isinstance(urls, str) else list(urls)
    out = [_base(u) for u in items if u and u.strip()]
    if not out:
        raise ValueError("RMClient needs at least one ResourceManager URL")
    return list(dict.fromkeys(out))


_ACTIVE_RM = re.compile(r"active RM:?\s*(https?://\S+)", re.IGNORECASE)
_REFRESH_URL = re.compile(r"url=(\S+)", re.IGNORECASE)
_RETRYABLE_STATUS = frozenset({502, 503, 504})
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout)  # the request never reached the RM


class _Standby(Exception):
    def __init__(self, target: str | None) -> None:
        super().__init__(target)
        self.target = target


def _standby_target(resp: httpx.Response) -> tuple[bool, str | None]:
    """Is this a standby RM's answer, and which base URL does it point to?"""
    location = resp.headers.get("location")
    text = ""
    if resp.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        text = resp.text[:2000]
    if 300 <= resp.status_code < 400 and location:
        return True, _origin(location)
    if STANDBY_MARKER in text:
        m = _ACTIVE_RM.search(text)
        if m:
            return True, _origin(m.group(1))
        m = _REFRESH_URL.search(resp.headers.get("refresh", ""))
        return True, _origin(m.group(1)) if m else None
    return False, None


def _origin(url: str) -> str | None:
    try:
        u = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        return None
    if not u.scheme or not u.host:
        return None
    port = f":{u.port}" if u.port else ""
    return f"{u.scheme}://{u.host}{port}"


def _error_message(resp: httpx.Response) -> tuple[str, str | None]:
    """Hadoop's ``{"RemoteException":{"exception","message","javaClassName"}}`` or text."""
    try:
        doc = resp.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("RemoteException"), dict):
        rex = doc["RemoteException"]
        return str(rex.get("message", "")), str(rex.get("exception") or "") or None
    text = resp.text.strip()
    return (text[:500] or resp.reason_phrase), None


class RMTransport:
    """HA-aware, retrying HTTP to the RM REST API; thread-safe. The REST calls themselves are
    :class:`~yarn_bridge.rm.client.RMClient`'s (which documents the arguments)."""

    def __init__(
        self,
        urls: str | Iterable[str],
        *,
        user: str | None = None,
        auth: AuthHook | None = None,
        timeout: float = 10.0,
        deadline: float = 30.0,
        max_attempts: int = 4,
        backoff: float = 0.1,
        max_backoff: float = 2.0,
        verify: bool | str = True,
        trust_env: bool = False,
    ) -> None:
        self._urls = _split_urls(urls)
        self._active = 0
        self._lock = threading.Lock()
        self.user = user
        self.auth = auth
        self.timeout = timeout
        self.deadline = deadline
        self.max_attempts = max(1, max_attempts)
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._http = httpx.Client(
            follow_redirects=False,
            verify=verify,
            trust_env=trust_env,
            headers={"Accept": "application/json"},
        )

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def urls(self) -> tuple[str, ...]:
        return tuple(self._urls)

    @property
    def active_url(self) -> str:
        """The RM that answered last (the first URL until one has)."""
        with self._lock:
            return self._urls[self._active]

    # -- transport ---------------------------------------------------------------------------

    def _has_auth_cookie(self) -> bool:
        return any(c.name == AUTH_COOKIE for c in self._http.cookies.jar)

    def _index_of(self, base: str) -> int:
        with self._lock:
            if base not in self._urls:
                self._urls.append(base)  # learned from a standby's redirect
            return self._urls.index(base)

    def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        idempotent: bool = True,
        check: Callable[[httpx.Response], None] | None = None,
    ) -> httpx.Response:
        endpoint = f"{method} {path}"
        start = time.monotonic()
        deadline = start + self.deadline
        query = {k: v for k, v in (params or {}).items() if v is not None}
        if self.user is not None:
            query["user.name"] = self.user
        seen: list[str] = []

        def past_deadline() -> RMUnavailable:
            return RMUnavailable(
                f"no answer within the {self.deadline:g} s deadline ({len(seen)} attempts)",
                endpoint=endpoint,
                attempts=seen,
            )

        rounds = Retry(
            Backoff(initial=self.backoff, factor=2, maximum=self.max_backoff),
            max_attempts=self.max_attempts,
            deadline=deadline,
        )
        for _ in rounds:
            with self._lock:
                first = self._active
                n = len(self._urls)
            order = [(first + k) % n for k in range(n)]
            tried: set[int] = set()
            while order:
                idx = order.pop(0)
                if idx in tried:
                    continue
                tried.add(idx)
                base = self._urls[idx]
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise past_deadline()
                url = base + path
                # With Hadoop's signed hadoop.auth cookie in hand, try it alone first: the RM
                # then skips its SPNEGO check (a fifth of the cost of a call on a local RM).
                by_cookie = self.auth is not None and self._has_auth_cookie()
                headers = dict(self.auth(method, url)) if self.auth and not by_cookie else {}
                try:
                    resp = self._http.request(
                        method,
                        url,
                        params=query,
                        json=body,
                        headers=headers,
                        timeout=min(self.timeout, remaining),
                    )
                    if by_cookie and resp.status_code == 401 and self.auth is not None:
                        # expired or another RM's: refused before acting, so safe to re-send
                        self._http.cookies.delete(AUTH_COOKIE)
                        resp = self._http.request(
                            method,
                            url,
                            params=query,
                            json=body,
                            headers=dict(self.auth(method, url)),
                            timeout=max(0.001, min(self.timeout, deadline - time.monotonic())),
                        )
                except httpx.TransportError as exc:
                    timeout = isinstance(exc, httpx.TimeoutException)
                    seen.append(
                        f"{base}: timeout ({type(exc).__name__})"
                        if timeout
                        else f"{base}: {type(exc).__name__}: {exc}"
                    )
                    if not idempotent and not isinstance(exc, _NOT_SENT):
                        raise RMUnavailable(
                            f"{'timed out' if timeout else 'connection lost'} after sending; "
                            "the RM may have acted on it (not re-sent)",
                            endpoint=endpoint,
                            attempts=seen,
                        ) from exc
                    continue
                is_standby, target = _standby_target(resp)
                if not is_standby and check is not None:
                    try:
                        check(resp)
                    except _Standby as sb:
                        is_standby, target = True, sb.target
                if is_standby:
                    seen.append(f"{base}: standby" + (f" (active: {target})" if target else ""))
                    if target is not None:
                        t = self._index_of(target)
                        if t not in tried:
                            order.insert(0, t)
                    continue
                if resp.status_code in _RETRYABLE_STATUS:
                    seen.append(f"{base}: HTTP {resp.status_code}")
                    continue
                with self._lock:
                    self._active = idx
                return resp
        if rounds.outcome == "deadline":
            raise past_deadline()
        raise RMUnavailable(
            f"no active ResourceManager after {self.max_attempts} rounds over "
            f"{', '.join(self._urls)}",
            endpoint=endpoint,
            attempts=seen,
        )

    def _call(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        ok: Iterable[int] = (200,),
        idempotent: bool = True,
        check: Callable[[httpx.Response], None] | None = None,
    ) -> httpx.Response:
        resp = self._request(
            method, path, params=params, body=body,
            idempotent=idempotent, check=check,
        )  # fmt: skip
        if resp.status_code in set(ok):
            return resp
        endpoint = f"{method} {path}"
        message, exception = _error_message(resp)
        status = resp.status_code
        detail = f"HTTP {status}" + (f" {exception}" if exception else "") + f": {message}"
        if status == 401 and "negotiate" in resp.headers.get("www-authenticate", "").lower():
            detail = "HTTP 401: the RM requires Kerberos (SPNEGO) " + (
                "and no credentials were given: log in with --principal and --keytab"
                if self.auth is None
                else "and refused this client's Negotiate token"
            )
        kind: type[RMHTTPError]
        if status == 400:
            kind = RMBadRequest
        elif status in (401, 403):
            kind = RMAuthError
        elif status == 404:
            kind = RMNotFound
        else:
            kind = RMHTTPError
        raise kind(detail, endpoint=endpoint, status=status, exception=exception)

    @staticmethod
    def _decode(resp: httpx.Response, endpoint: str) -> Any:
        ctype = resp.headers.get("content-type", "").split(";")[0].strip()
        text = resp.text
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            snippet = text[max(0, exc.pos - 30) : exc.pos + 30]
            what = "empty body" if not text.strip() else f"{exc.msg} at char {exc.pos}"
            raise RMResponseError(
                f"malformed JSON ({what}; content-type {ctype or 'none'}; "
                f"{len(text)} chars; near {snippet!r})",
                endpoint=endpoint,
            ) from None

    def _get(self, path: str, params: Mapping[str, Any] | None = None,
             check: Callable[[httpx.Response], None] | None = None) -> Any:  # fmt: skip
        resp = self._call("GET", path, params=params, check=check)
        return self._decode(resp, f"GET {path}")
