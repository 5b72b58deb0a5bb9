"""Apps, their credentials and their sessions: who may speak for which app, and who is listening.

The first part of the live arbiter (Themis §4.3's Agents, seen from the arbiter): every
application master registers once and gets a token bound to its app (only its hash is kept);
it then opens a session, a stream on which the arbiter sends it offers, allocations and
revocations, and keeps it alive with heartbeats. An app also reports ρ_current between rounds
(the visibility step) and, for SRTF-like policies, its progress.

Not thread-safe on its own: :class:`arbiter.core.ArbiterCore` serialises every call under its
lock. The clock is passed in as ``now``, so the part is tested without time passing.
"""

from __future__ import annotations

import math
import queue
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from arbiter.journal import AppRecord, Journal, hash_token, token_matches
from arbiter.messages import CLOSE, Code, Outbox, RequestError

__all__ = ["AppSessions", "Progress", "Session"]


@dataclass
class Session:
    """An open stream to an app's Agent and when it was last heard from."""

    outbox: Outbox
    last_seen: float


@dataclass(frozen=True)
class Progress:
    """An app's latest progress report (remaining time, for SRTF-like policies)."""

    iters_done: float
    iters_remaining: float
    iter_time_s: float


class AppSessions:
    """The registered apps (journaled), their token index, open sessions and reports.

    >>> from arbiter.journal import SQLiteJournal, new_token
    >>> book = AppSessions({}, SQLiteJournal(":memory:"), admin_token="root")
    >>> token = new_token()
    >>> book.add(AppRecord("app-1", hash_token(token), "a", "u", "default", 2, (), 0.0))
    >>> book.authenticate_app(token)
    'app-1'
    >>> _ = book.open("app-1", now=0.0)
    >>> book.members()
    ['app-1']
    >>> book.silent(now=100.0, timeout=30.0)
    ['app-1']
    >>> book.members()
    []
    """

    def __init__(
        self, apps: Mapping[str, AppRecord], journal: Journal, *, admin_token: str
    ) -> None:
        self.journal = journal
        self.apps: dict[str, AppRecord] = dict(apps)
        self._by_token: dict[str, str] = {a.token_hash: a.app_id for a in self.apps.values()}
        self.admin_hash = hash_token(admin_token)
        self.sessions: dict[str, Session] = {}
        self.rho_reports: dict[str, float] = {}
        self.progress: dict[str, Progress] = {}
        # when each app was last heard from: registration, session, heartbeat, report
        self.heard: dict[str, float] = {a.app_id: a.registered_at for a in self.apps.values()}

    # ------------------------------------------------------------------ authentication

    def authenticate_app(self, token: str | None) -> str:
        if not token:
            raise RequestError(Code.UNAUTHENTICATED, "missing x-app-token metadata")
        app_id = self._by_token.get(hash_token(token))  # one hash and a dict look-up
        if app_id is None:
            raise RequestError(Code.UNAUTHENTICATED, "unknown app token")
        return app_id

    def authorize_app(self, token: str | None, app_id: str) -> None:
        """The token must belong to ``app_id``: an AM acts only for its own app."""
        owner = self.authenticate_app(token)
        if owner != app_id:
            raise RequestError(
                Code.PERMISSION_DENIED, f"this token belongs to {owner}, not to {app_id}"
            )

    def authorize_admin(self, token: str | None) -> None:
        if not token:
            raise RequestError(Code.UNAUTHENTICATED, "missing x-admin-token metadata")
        if not token_matches(token, self.admin_hash):
            raise RequestError(Code.PERMISSION_DENIED, "wrong admin token")

    # ------------------------------------------------------------------ apps

    def add(self, record: AppRecord) -> None:
        """Journal ``record`` and index its token."""
        self.journal.put_app(record)
        self.apps[record.app_id] = record
        self._by_token[record.token_hash] = record.app_id
        self.heard[record.app_id] = record.registered_at

    def remove(self, app_id: str) -> AppRecord | None:
        """Forget ``app_id``: close its session, drop its record, token and reports."""
        if app_id in self.apps:
            self.journal.remove_app(app_id)  # first: a journal that fails changes nothing
        session = self.sessions.pop(app_id, None)
        if session is not None:
            session.outbox.put(CLOSE)
        record = self.apps.pop(app_id, None)
        if record is not None:
            self._by_token.pop(record.token_hash, None)
        self.rho_reports.pop(app_id, None)
        self.progress.pop(app_id, None)
        self.heard.pop(app_id, None)
        return record

    def members(self) -> list[str]:
        """Registered apps with an open session, sorted."""
        return sorted(a for a in self.sessions if a in self.apps)

    def active(self, now: float, timeout: float) -> list[str]:
        """Registered apps with an open session or heard from within ``timeout`` (one that
        registered and has not connected yet, or is reconnecting, still wants GPUs)."""
        return sorted(
            a
            for a in self.apps
            if a in self.sessions or now - self.heard.get(a, -math.inf) <= timeout
        )

    # ------------------------------------------------------------------ sessions

    def open(
        self, app_id: str, outbox: Outbox | None = None, *, now: float, resend: Iterable = ()
    ) -> Outbox:
        """Start ``app_id``'s session (a reconnect replaces the old stream) and put the
        messages of ``resend`` on it first."""
        old = self.sessions.get(app_id)
        if old is not None:
            old.outbox.put(CLOSE)
        session = Session(outbox if outbox is not None else queue.Queue(), now)
        self.sessions[app_id] = session
        self.heard[app_id] = now
        for message in resend:
            session.outbox.put(message)
        return session.outbox

    def close(self, app_id: str, outbox: Outbox) -> None:
        current = self.sessions.get(app_id)
        if current is not None and current.outbox is outbox:
            del self.sessions[app_id]

    def heartbeat(self, app_id: str, now: float) -> None:
        """``app_id`` was heard from at ``now`` (a heartbeat applied late, after a later
        message, does not move the time back)."""
        session = self.sessions.get(app_id)
        if session is not None:
            session.last_seen = max(session.last_seen, now)
        if app_id in self.apps:
            self.heard[app_id] = max(self.heard.get(app_id, now), now)

    def send(self, app_id: str, message: object) -> None:
        """Put ``message`` on ``app_id``'s stream, if it has one open."""
        session = self.sessions.get(app_id)
        if session is not None:
            session.outbox.put(message)

    def silent(self, now: float, timeout: float) -> list[str]:
        """Close the sessions of Agents silent past ``timeout``; returns their apps."""
        dropped = []
        for app_id, session in list(self.sessions.items()):
            if now - session.last_seen > timeout:
                session.outbox.put(CLOSE)
                del self.sessions[app_id]
                self.rho_reports.pop(app_id, None)
                dropped.append(app_id)
        return dropped

    # ------------------------------------------------------------------ reports

    def report_rho(self, app_id: str, rho: float, now: float) -> None:
        if math.isnan(rho) or rho <= 0:
            raise RequestError(Code.INVALID_ARGUMENT, f"rho_report.rho must be > 0, got {rho}")
        self.rho_reports[app_id] = rho
        self.heartbeat(app_id, now)

    def report_progress(
        self, app_id: str, iters_done: int, iters_remaining: int, iter_time_s: float, now: float
    ) -> None:
        self.beat(
            app_id, (Progress(float(iters_done), float(iters_remaining), float(iter_time_s)),), now
        )

    def beat(self, app_id: str, reports: Sequence[Progress], now: float) -> None:
        """A heartbeat carrying ``reports`` (the latest one is kept, as for one report each)."""
        if reports and app_id in self.apps:  # not an app removed since it was sent
            self.progress[app_id] = reports[-1]
        self.heartbeat(app_id, now)
