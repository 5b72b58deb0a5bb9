"""The arbiter's journal in ZooKeeper, fenced by the leader epoch (the arbiter's HA pair).

The same :class:`~arbiter.journal.Journal` interface as :class:`~arbiter.journal.SQLiteJournal`
(ARCHITECTURE.md, principle 6: everything that must survive a crash goes through one journal),
so the core recovers from it exactly as it recovers from the SQLite file after a restart. The
state lives under one root znode (``arbiter.ha.zk-root``)::

    ROOT/epoch                  the leader epoch: its *version* is the fencing token
    ROOT/state/round            {"round": n, "leases": [...]}     (zlib-compressed JSON)
    ROOT/state/drains           ["machine", ...]
    ROOT/state/apps/<app_id>    one AppRecord (token *hash* only, never the token)
    ROOT/state/bids/<app_id>    the app's last bid table                (zlib JSON)
    ROOT/state/knobs/<key>      a runtime knob's value

**Fencing.** An arbiter that wins the election bumps ``ROOT/epoch`` (:func:`claim_epoch`) and
writes with the version it got. Every write is one ZooKeeper ``multi()`` that starts with
``check(ROOT/epoch, version)``: once another arbiter has claimed the epoch, a deposed active's
write fails as a whole (:class:`Fenced`), so it cannot commit anything, whatever it believes.
A round's outcome is one ``multi()``, so a reader sees the whole round or none of it, as with
SQLite's transaction.

**Errors.** A fenced write, a ZooKeeper that cannot be reached, or a ``multi()`` larger than
ZooKeeper accepts raise :class:`~arbiter.sqlite_store.StoreError` (the core then refuses
changes with UNAVAILABLE and is unhealthy, as for a full disk). A connection lost *during* a
write leaves it unknown whether it committed: the HA shell (:mod:`arbiter.ha`) steps down on any
connection loss, and the next active reloads whatever ZooKeeper holds.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import asdict, replace
from types import MappingProxyType
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, KazooException, NoNodeError, RolledBackError
from kazoo.handlers.threading import KazooTimeoutError

from arbiter.auction import Bid
from arbiter.journal import (
    AppRecord,
    Recovered,
    _bid_from_json,
    _bid_to_json,
    recovered,
)
from arbiter.rounds import ArbiterState, Lease, LeaseSource, check_invariants
from arbiter.sqlite_store import StoreError

__all__ = ["Fenced", "ZooKeeperJournal", "claim_epoch", "decode", "encode", "lease_rows"]

# ZooKeeper's default jute.maxbuffer is 1 MiB per request; stay clear of it with one message.
MAX_REQUEST_BYTES = 1000 * 1024


class Fenced(StoreError):
    """Another arbiter has claimed the leader epoch: this one's writes are refused."""


def encode(value: object) -> bytes:
    """zlib-compressed JSON (GPU ids repeat a lot: bid tables shrink about tenfold)."""
    return zlib.compress(json.dumps(value, separators=(",", ":")).encode(), 1)


def decode(data: bytes) -> Any:
    return json.loads(zlib.decompress(data))


def lease_rows(leases: Iterable[Lease]) -> list[list[object]]:
    """Leases as JSON rows (app, GPUs, start, end, round, source); the inverse of
    :func:`_lease_from_row`."""
    return [[x.app_id, sorted(x.gpus), x.start, x.end, x.round, str(x.source)] for x in leases]


def _lease_from_row(row: list[Any]) -> Lease:
    app, gpus, start, end, rnd, source = row
    return Lease(app, frozenset(gpus), float(start), float(end), int(rnd), LeaseSource(source))


def claim_epoch(client: KazooClient, root: str, holder: str, timeout_s: float = 10.0) -> int:
    """Make ``holder`` the leader epoch's owner and return the epoch (the znode's version after
    the write); every earlier epoch's journal is fenced from then on. A ZooKeeper that does not
    answer within ``timeout_s`` raises kazoo's timeout error."""
    path = f"{root}/epoch"
    client.ensure_path_async(path).get(timeout=timeout_s)
    stat = client.set_async(path, holder.encode()).get(timeout=timeout_s)
    return int(stat.version)


def current_epoch(client: KazooClient, root: str) -> tuple[int, str]:
    """The leader epoch and who claimed it (``(-1, "")`` before anyone has)."""
    try:
        data, stat = client.get(f"{root}/epoch")
    except NoNodeError:
        return -1, ""
    return int(stat.version), data.decode()


class ZooKeeperJournal:
    """The journal under ``root`` in ZooKeeper, writing as the holder of ``epoch`` (see the
    module docstring). ``client`` is started and owned by the caller."""

    def __init__(
        self, client: KazooClient, root: str, epoch: int, *, timeout_s: float = 10.0
    ) -> None:
        """``timeout_s``: how long one ZooKeeper call may take before it is a
        :class:`~arbiter.sqlite_store.StoreError` (the HA shell passes its session timeout)."""
        self.client = client
        self.timeout_s = timeout_s
        self.root = root.rstrip("/")
        self.path = f"zookeeper:{self.root}"  # what messages name (as SQLiteJournal's file)
        self.epoch = epoch
        self._state = f"{self.root}/state"
        for sub in ("apps", "bids", "knobs"):
            self._zk(client.ensure_path_async, f"{self._state}/{sub}")
        self._bids: set[str] = set()  # apps with a bid znode (this arbiter is the only writer)
        self._knobs: set[str] = set()
        self._leases: list[Lease] = []  # the committed leases, for remove_app's rewrite
        self._round = 0
        self.last_request_bytes = 0
        self.fenced = False  # set by the first write refused for a newer epoch

    # -- plumbing ------------------------------------------------------------------------

    def _zk(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """``fn(*args)`` (a kazoo ``*_async`` call, or a transaction's ``commit_async``) waited
        for at most :attr:`timeout_s`: kazoo's own calls wait for ever while the connection is
        down, and the core calls the journal under its lock."""
        try:
            return fn(*args, **kwargs).get(timeout=self.timeout_s)
        except KazooTimeoutError as exc:
            raise StoreError(
                f"journal {self.path}: ZooKeeper did not answer within {self.timeout_s:g} s"
            ) from exc
        except KazooException as exc:
            raise StoreError(f"journal {self.path}: ZooKeeper: {type(exc).__name__} {exc}") from exc

    def _commit(self, ops: list[tuple[str, str, bytes | None]]) -> None:
        """One ``multi()``: check the epoch, then ``ops`` as (kind, path, data) with kind one
        of create / set / delete; raises :class:`Fenced` or :class:`StoreError`."""
        size = sum(len(p) + len(d or b"") + 16 for _, p, d in ops)
        self.last_request_bytes = size
        if size > MAX_REQUEST_BYTES:
            raise StoreError(
                f"journal {self.path}: one write of {size} bytes is more than ZooKeeper's "
                f"request limit ({MAX_REQUEST_BYTES} of jute.maxbuffer's 1 MiB); nothing written"
            )
        tx = self.client.transaction()
        tx.check(f"{self.root}/epoch", self.epoch)
        for kind, path, data in ops:
            if kind == "create":
                tx.create(path, data or b"")
            elif kind == "set":
                tx.set_data(path, data or b"")
            else:
                tx.delete(path)
        results = self._zk(tx.commit_async)
        if results and isinstance(results[0], BadVersionError | NoNodeError):
            self.fenced = True
            raise Fenced(
                f"journal {self.path}: fenced: the leader epoch is no longer {self.epoch} "
                "(another arbiter is active); nothing written"
            )
        failed = [
            (op, r)
            for op, r in zip(ops, results[1:], strict=False)
            if isinstance(r, Exception) and not isinstance(r, RolledBackError)
        ]
        if failed:
            (kind, path, _), err = failed[0]
            raise StoreError(
                f"journal {self.path}: {kind} {path} failed ({type(err).__name__}); nothing written"
            )

    def _put(self, path: str, data: bytes, exists: bool) -> tuple[str, str, bytes | None]:
        return ("set" if exists else "create", path, data)

    # -- writes ----------------------------------------------------------------------------

    def put_app(self, app: AppRecord) -> None:
        path = f"{self._state}/apps/{app.app_id}"
        exists = self._zk(self.client.exists_async, path) is not None
        record = {**asdict(app), "jobs": [dict(j) for j in app.jobs]}
        self._commit([self._put(path, json.dumps(record).encode(), exists)])

    def remove_app(self, app_id: str) -> None:
        ops: list[tuple[str, str, bytes | None]] = []
        kept = [x for x in self._leases if x.app_id != app_id]
        if len(kept) != len(self._leases):
            ops.append(("set", f"{self._state}/round", self._round_blob(self._round, kept)))
        if app_id in self._bids:
            ops.append(("delete", f"{self._state}/bids/{app_id}", None))
        if self._zk(self.client.exists_async, f"{self._state}/apps/{app_id}") is not None:
            ops.append(("delete", f"{self._state}/apps/{app_id}", None))
        if not ops:
            return
        self._commit(ops)
        self._leases = kept
        self._bids.discard(app_id)

    @staticmethod
    def _round_blob(rnd: int, leases: Iterable[Lease]) -> bytes:
        return encode({"round": rnd, "leases": lease_rows(leases)})

    def commit_round(
        self,
        state: ArbiterState,
        bids: Iterable[Bid] = (),
        *,
        drained: Iterable[str] | None = None,
    ) -> None:
        """Make ``state``'s leases and round (and the bids, and the drains when given) durable in
        one fenced ``multi()``; a state that breaks the invariant is never written."""
        check_invariants(state)
        bids = list(bids)
        ops: list[tuple[str, str, bytes | None]] = [
            ("set", f"{self._state}/round", self._round_blob(state.round, state.leases))
        ]
        if drained is not None:
            ops.append(("set", f"{self._state}/drains", encode(sorted(drained))))
        for b in bids:
            path = f"{self._state}/bids/{b.app_id}"
            ops.append(self._put(path, encode(_bid_to_json(b)), b.app_id in self._bids))
        self._commit(ops)
        self._leases, self._round = list(state.leases), state.round
        self._bids.update(b.app_id for b in bids)

    def put_knob(self, key: str, value: str) -> None:
        path = f"{self._state}/knobs/{key}"
        self._commit([self._put(path, value.encode(), key in self._knobs)])
        self._knobs.add(key)

    def probe(self) -> None:
        """A write of nothing under the epoch check: raises while fenced or unreachable."""
        self._commit([])

    # -- reads -------------------------------------------------------------------------

    def _children(self, sub: str) -> dict[str, bytes]:
        """Every child of ``state/sub`` with its data, read concurrently."""
        base = f"{self._state}/{sub}"
        names = sorted(self._zk(self.client.get_children_async, base))
        pending = [(n, self.client.get_async(f"{base}/{n}")) for n in names]
        out = {}
        for name, result in pending:
            try:
                out[name] = result.get(timeout=self.timeout_s)[0]
            except NoNodeError:
                continue
            except (KazooException, KazooTimeoutError) as exc:
                raise StoreError(f"journal {self.path}: ZooKeeper: {exc!r}") from exc
        return out

    def load(self, gpus: frozenset[str], *, trim_unknown: bool = False) -> Recovered:
        """Recover apps, leases, bids, round, knobs and drains, as
        :meth:`arbiter.journal.SQLiteJournal.load` does (same checks, same trimming)."""
        for sub, blob in (("round", self._round_blob(0, ())), ("drains", encode([]))):
            if self._zk(self.client.exists_async, f"{self._state}/{sub}") is None:  # a new journal
                self._commit([("create", f"{self._state}/{sub}", blob)])
        apps = {
            name: _app_from_json(json.loads(data)) for name, data in self._children("apps").items()
        }
        bid_blobs = self._children("bids")
        bids = {a: _bid_from_json(a, decode(b)) for a, b in bid_blobs.items()}
        knobs = {k: v.decode() for k, v in self._children("knobs").items()}
        record = decode(self._zk(self.client.get_async, f"{self._state}/round")[0])
        drained = frozenset(decode(self._zk(self.client.get_async, f"{self._state}/drains")[0]))
        leases = tuple(_lease_from_row(r) for r in record["leases"])
        self._leases, self._round = list(leases), int(record["round"])
        self._bids, self._knobs = set(bids), set(knobs)
        if trim_unknown:
            trimmed = tuple(
                replace(x, gpus=x.gpus & gpus) if not x.gpus <= gpus else x for x in leases
            )
            leases = tuple(x for x in trimmed if x.gpus)
        state = ArbiterState(
            gpus=frozenset(gpus),
            leases=leases,
            round=int(record["round"]),
            last_bids=MappingProxyType(bids),
        )
        return recovered(str(self.path), apps, state, knobs, drained)

    def close(self) -> None:
        """Nothing to release: the client belongs to the caller."""


def _app_from_json(d: Mapping[str, Any]) -> AppRecord:
    return AppRecord(**{**d, "jobs": tuple(d.get("jobs", ()))})
