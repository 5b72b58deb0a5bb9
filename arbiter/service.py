"""gRPC shell of the arbiter: the three services over the core, and status codes (spec B.7).

The wire is the proto (``protos/yarnarbiter/v1/arbiter.proto``); this module only connects
protobuf messages, converted by :mod:`arbiter.wire` (the same functions the clients use), to
:class:`arbiter.core.ArbiterCore` calls, reads credentials from metadata (``x-app-token``,
``x-admin-token``), and maps :class:`~arbiter.core.RequestError` to gRPC status codes. Bad
input never reaches the core half-parsed: a malformed bid (NaN or non-positive ρ, unknown GPUs,
too many rows) is rejected with INVALID_ARGUMENT naming the field, and state is unchanged.
Every refused credential is logged.

Fan-in (thousands of Agents on one event loop): a heartbeat with ``want_ack`` is answered on
the Session stream with a ``HeartbeatAck``, its batched progress reports applied under one lock,
or kept for the lock's next holder when the scheduling loop holds it (``ArbiterCore.beat``: the
loop never waits for a round; the unary ``ReportProgress`` stays for existing clients); items
from the scheduler thread reach
the loop in batches, one wake-up per burst; an offer is serialized once for all its
participants. ``benchmarks/arbiter_load.py`` measures it.

:func:`build_server` assembles the gRPC server: the three services, the standard health and
reflection services, a message-size limit, and TLS / mutual TLS from certificate files.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import grpc
from google.protobuf.message import DecodeError
from grpc_health.v1 import _async as health_async
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from arbiter.admission import Credentials
from arbiter.channels import MIN_PING_INTERVAL_MS
from arbiter.cluster import Cluster
from arbiter.config import Config
from arbiter.core import (
    CLOSE,
    Allocation,
    ArbiterCore,
    Code,
    Offer,
    RequestError,
    Revocation,
)
from arbiter.wire.admin import app_info_to_pb, cluster_state_to_pb
from arbiter.wire.appmaster import (
    allocation_to_pb,
    bid_from_pb,
    heartbeat_from_pb,
    job_from_pb,
    lease_to_pb,
    offer_to_pb,
    progress_from_pb,
    revocation_to_pb,
    session_error_to_pb,
)
from arbiter.wire.share import share_change_to_pb
from protos.yarnarbiter.v1 import arbiter_pb2 as pb
from protos.yarnarbiter.v1 import arbiter_pb2_grpc as rpc

__all__ = ["AdminService", "AppMasterService", "QueryShareService", "build_server"]

log = logging.getLogger("yarn_arbiter.service")

_STATUS = {code: getattr(grpc.StatusCode, code.value) for code in Code}


# Every method the server serves, by full name; a call to any other counts as "unknown", so a
# caller inventing method names cannot add a /metrics series per name.
_SERVED = frozenset(
    f"/{service.full_name}/{method.name}"
    for descriptor in (pb.DESCRIPTOR, health_pb2.DESCRIPTOR)
    for service in descriptor.services_by_name.values()
    for method in service.methods
) | {f"/{reflection.SERVICE_NAME}/ServerReflectionInfo"}
UNKNOWN_METHOD = "unknown"


class _CountCalls(grpc.aio.ServerInterceptor):
    """Counts every call by method name into ``core.rpc_calls`` (for ``/metrics``); calls to
    methods the server does not serve are counted under :data:`UNKNOWN_METHOD`."""

    def __init__(self, core: ArbiterCore) -> None:
        self.calls = core.rpc_calls

    async def intercept_service(self, continuation, handler_call_details):
        method = handler_call_details.method
        self.calls[method.rsplit("/", 1)[-1] if method in _SERVED else UNKNOWN_METHOD] += 1
        return await continuation(handler_call_details)


class _Post:
    """Hands items from other threads to queues of one event loop, waking the loop once per
    batch: the scheduler thread puts an offer into every participant's outbox at once (3,000
    at fan-in), and one ``call_soon_threadsafe`` each would write the loop's self-pipe 3,000
    times. A batch is delivered :data:`_POST_CHUNK` items per turn of the loop, so the
    heartbeats that arrive meanwhile are read (and answered) between chunks instead of after
    the whole burst."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._items: collections.deque[tuple[asyncio.Queue, object]] = collections.deque()
        self._scheduled = False

    def put(self, queue: asyncio.Queue, item: object) -> None:
        self._items.append((queue, item))  # atomic; a drain takes it
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        items = self._items
        for _ in range(_POST_CHUNK):
            if not items:
                break
            queue, item = items.popleft()
            queue.put_nowait(item)
        if items:  # the rest on the next turn, after the loop has polled its sockets
            self._loop.call_soon(self._drain)
            return
        self._scheduled = False
        if items:  # appended by a thread that still saw a drain scheduled
            self._scheduled = True
            self._loop.call_soon(self._drain)


_POST_CHUNK = 64
_posts: dict[asyncio.AbstractEventLoop, _Post] = {}
_posts_lock = threading.Lock()


def _post_for(loop: asyncio.AbstractEventLoop) -> _Post:
    with _posts_lock:
        post = _posts.get(loop)
        if post is None:
            for old in [x for x in _posts if x.is_closed()]:
                del _posts[old]
            post = _posts[loop] = _Post(loop)
        return post


class _Bridge:
    """A queue the (threaded) core puts into and an asyncio handler awaits.

    ``put`` may be called from any thread; items reach the event loop that created the bridge
    in the order each thread put them, and :data:`CLOSE` comes after everything put before it.
    """

    def __init__(self) -> None:
        loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue = asyncio.Queue()
        self._thread = threading.get_ident()
        self._post = _post_for(loop)

    def put(self, item: object) -> None:
        if threading.get_ident() == self._thread and item is not CLOSE:
            self._queue.put_nowait(item)  # on the loop (an ack, an error): no wake-up needed
        else:  # CLOSE queues behind what other threads put before (an allocation)
            self._post.put(self._queue, item)

    async def get(self) -> object:
        return await self._queue.get()


def _metadata(context: grpc.aio.ServicerContext, key: str) -> str | None:
    for k, v in context.invocation_metadata() or ():
        if k == key:
            return v
    return None


def _credentials_of(context: grpc.aio.ServicerContext) -> Credentials:
    """The registration credentials a call carries (:mod:`arbiter.admission`)."""
    return Credentials(
        admin=_metadata(context, "x-admin-token"),
        submit=_metadata(context, "x-submit-token"),
        service=_metadata(context, "x-service-token"),
    )


async def _abort(context: grpc.aio.ServicerContext, err: RequestError, core: ArbiterCore) -> None:
    core.rpc_refused[err.code.value] += 1
    if err.code in (Code.UNAUTHENTICATED, Code.PERMISSION_DENIED):
        log.warning("refused %s from %s: %s", err.code.value, context.peer(), err.message)
    await context.abort(_STATUS[err.code], err.message)


# The core puts one Offer object into every participant's outbox: serialize its message once
# (3,000 participants at fan-in were 3,000 serializations of the same message).
_offer_cache: collections.OrderedDict[int, tuple[Offer, bytes]] = collections.OrderedDict()
_offer_lock = threading.Lock()


def _offer_bytes(item: Offer, cluster: Cluster) -> bytes:
    with _offer_lock:
        hit = _offer_cache.get(id(item))
        if hit is not None and hit[0] is item:
            return hit[1]
    data = pb.ArbiterMessage(offer=offer_to_pb(item, cluster)).SerializeToString()
    with _offer_lock:
        _offer_cache[id(item)] = (item, data)
        while len(_offer_cache) > 8:
            _offer_cache.popitem(last=False)
    return data


def _outbound(item: object, cluster: Cluster) -> pb.ArbiterMessage | bytes:
    """The message for an outbox item, or its bytes when already serialized (an offer)."""
    if isinstance(item, pb.ArbiterMessage):  # built on the loop (a heartbeat's ack)
        return item
    if isinstance(item, Offer):
        return _offer_bytes(item, cluster)
    if isinstance(item, Allocation):
        return pb.ArbiterMessage(allocation=allocation_to_pb(item))
    if isinstance(item, Revocation):
        return pb.ArbiterMessage(revocation=revocation_to_pb(item))
    if isinstance(item, RequestError):
        return pb.ArbiterMessage(error=session_error_to_pb(item))
    raise TypeError(f"cannot send {item!r}")


def _serialize_session(msg: pb.ArbiterMessage | bytes) -> bytes:
    """The Session stream's response serializer: messages, and bytes passed through."""
    return msg if isinstance(msg, bytes) else msg.SerializeToString()


class _Captured:
    """Takes the method handlers a generated ``add_*Servicer_to_server`` registers."""

    def __init__(self) -> None:
        self.name = ""
        self.handlers: dict[str, grpc.RpcMethodHandler] = {}

    def add_generic_rpc_handlers(self, handlers: object) -> None:
        pass

    def add_registered_method_handlers(self, name: str, handlers: dict) -> None:
        self.name, self.handlers = name, dict(handlers)


def _add_appmaster(servicer: rpc.AppMasterServicer, server: grpc.aio.Server) -> None:
    """``rpc.add_AppMasterServicer_to_server`` with the Session stream's serializer taking
    pre-serialized bytes too (the offers)."""
    captured = _Captured()
    rpc.add_AppMasterServicer_to_server(servicer, captured)
    session = captured.handlers["Session"]
    captured.handlers["Session"] = grpc.stream_stream_rpc_method_handler(
        session.stream_stream,
        request_deserializer=session.request_deserializer,
        response_serializer=_serialize_session,
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(captured.name, captured.handlers),)
    )
    server.add_registered_method_handlers(captured.name, captured.handlers)


@dataclass(frozen=True)
class _Abort:
    """Ends a session's call with ``error``'s status (put by its reader task)."""

    error: RequestError


def _malformed(exc: DecodeError) -> RequestError:
    return RequestError(Code.INVALID_ARGUMENT, f"malformed session message: {exc}")


class AppMasterService(rpc.AppMasterServicer):
    def __init__(self, core: ArbiterCore) -> None:
        self.core = core

    async def RegisterApp(self, request, context):
        try:
            jobs = [job_from_pb(j) for j in request.jobs]
            app_id, token = self.core.register_app(
                app_name=request.app_name,
                user=request.user,
                queue_name=request.queue,
                max_gpu_demand=request.max_gpu_demand,
                jobs=jobs,
                yarn_app_id=request.yarn_application_id,
                credentials=_credentials_of(context),
                request_bytes=request.ByteSize(),
            )
        except RequestError as err:
            await _abort(context, err, self.core)
        cfg = self.core.config
        return pb.RegisterAppResponse(
            app_id=app_id,
            app_token=token,
            lease_seconds=cfg["arbiter.lease.seconds"],
            heartbeat_timeout_s=cfg["arbiter.heartbeat.timeout.seconds"],
        )

    async def Session(self, request_iterator, context) -> AsyncIterator[pb.ArbiterMessage | bytes]:
        token = _metadata(context, "x-app-token")
        try:
            first = await anext(aiter(request_iterator), None)
        except DecodeError as exc:
            await _abort(context, _malformed(exc), self.core)
        if first is None:
            return
        try:
            if first.WhichOneof("kind") != "hello":
                raise RequestError(Code.INVALID_ARGUMENT, "the first session message must be hello")
            app_id = first.hello.app_id
            self.core.authorize_app(token, app_id)
        except RequestError as err:
            await _abort(context, err, self.core)
        outbox = _Bridge()
        self.core.open_session(app_id, outbox, first.hello.resume_after_round)
        # the session is open: say so at once (headers; the Python Agent waits for its first
        # heartbeat's ack instead, and gives up on a stream unanswered for
        # SESSION_OPEN_TIMEOUT_S)
        await context.send_initial_metadata(())

        async def read() -> None:
            try:
                async for msg in request_iterator:
                    kind = msg.WhichOneof("kind")
                    try:
                        if kind == "heartbeat":
                            beat = msg.heartbeat
                            reports = heartbeat_from_pb(beat, self.core.cluster)
                            rho = self.core.beat(app_id, reports, rho=beat.want_ack)
                            if beat.want_ack:
                                ack = pb.HeartbeatAck(seq=beat.seq, rho=rho)
                                outbox.put(pb.ArbiterMessage(heartbeat_ack=ack))
                        elif kind == "rho_report":
                            self.core.report_rho(app_id, msg.rho_report.rho)
                        elif kind == "bid":
                            bid = bid_from_pb(app_id, msg.bid)
                            self.core.submit_bid(app_id, msg.bid.round, bid)
                        else:
                            raise RequestError(
                                Code.INVALID_ARGUMENT, f"unexpected session message {kind!r}"
                            )
                    except RequestError as err:
                        outbox.put(err)  # reported on the stream; the session stays open
            except (grpc.RpcError, asyncio.CancelledError):
                pass
            except DecodeError as exc:  # not an AgentMessage: the call ends, refused
                outbox.put(_Abort(_malformed(exc)))
            finally:
                outbox.put(CLOSE)

        reader = asyncio.create_task(read())
        try:
            while True:
                item = await outbox.get()
                if item is CLOSE:
                    break
                if isinstance(item, _Abort):
                    await _abort(context, item.error, self.core)
                yield _outbound(item, self.core.cluster)
        finally:
            reader.cancel()
            self.core.close_session(app_id, outbox)

    async def RenewLease(self, request, context):
        try:
            app_id = self.core.authenticate_app(_metadata(context, "x-app-token"))
            lease = self.core.renew(app_id, request.lease_id)
        except RequestError as err:
            await _abort(context, err, self.core)
        return pb.RenewLeaseResponse(lease=lease_to_pb(lease))

    async def ReleaseLease(self, request, context):
        try:
            app_id = self.core.authenticate_app(_metadata(context, "x-app-token"))
            gpus = self.core.release(app_id, request.lease_id, request.gpu_ids)
        except RequestError as err:
            await _abort(context, err, self.core)
        return pb.ReleaseLeaseResponse(released_gpu_ids=sorted(gpus))

    async def ReportProgress(self, request, context):
        try:
            app_id = self.core.authenticate_app(_metadata(context, "x-app-token"))
            report = progress_from_pb(request, self.core.cluster)
            rho = self.core.beat(app_id, (report,), rho=True)
        except RequestError as err:
            await _abort(context, err, self.core)
        return pb.ProgressAck(rho=rho)


class QueryShareService(rpc.QueryShareServicer):
    def __init__(self, core: ArbiterCore) -> None:
        self.core = core

    async def RegisterQuery(self, request, context):
        if len(request.query_name) > 1024:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "query_name is <= 1024 chars")
        try:
            job_id, token = self.core.register_query(
                request.query_name,
                user=request.user[:256],
                credentials=_credentials_of(context),
                request_bytes=request.ByteSize(),
            )
        except RequestError as err:
            await _abort(context, err, self.core)
        return pb.RegisterQueryResponse(job_id=job_id, job_token=token)

    async def SubscribeShare(self, request, context):
        try:
            self.core.authorize_query(_metadata(context, "x-app-token"), request.job_id)
        except RequestError as err:
            await _abort(context, err, self.core)
        q = _Bridge()
        self.core.subscribe_share(request.job_id, q)
        try:
            while True:
                item = await q.get()
                if item is CLOSE:
                    break
                job_id, change = item
                yield share_change_to_pb(job_id, change)
        finally:
            self.core.unsubscribe_share(request.job_id, q)

    async def UnregisterQuery(self, request, context):
        try:
            self.core.authorize_query(_metadata(context, "x-app-token"), request.job_id)
            self.core.unregister_query(request.job_id)
        except RequestError as err:
            await _abort(context, err, self.core)
        return pb.UnregisterQueryResponse()

    async def ReportPlanSwitch(self, request, context):
        try:
            share = request.share
            self.core.report_plan_switch(
                _metadata(context, "x-app-token"),
                request.job_id,
                at_s=request.at_s,
                from_plan=request.from_plan,
                to_plan=request.to_plan,
                vcores=share.vcores,
                memory_mb=share.memory_mb,
                cancelled=request.cancelled_stages,
                reused=request.reused_stages,
            )
        except RequestError as err:
            await _abort(context, err, self.core)
        return pb.PlanSwitchAck()


class AdminService(rpc.AdminServicer):
    def __init__(self, core: ArbiterCore) -> None:
        self.core = core

    async def _admin(self, context) -> None:
        try:
            self.core.authorize_admin(_metadata(context, "x-admin-token"))
        except RequestError as err:
            await _abort(context, err, self.core)

    async def GetClusterState(self, request, context):
        await self._admin(context)
        return cluster_state_to_pb(self.core.snapshot(), self.core.config["arbiter.policy"])

    async def ListLeases(self, request, context):
        await self._admin(context)
        snap = self.core.snapshot()
        # live and reserved leases; one past its term is not listed even while the journal
        # cannot commit its expiry
        return pb.ListLeasesResponse(
            leases=[
                lease_to_pb(x)
                for x in snap.leases
                if x.end > snap.now and (not request.app_id or x.app_id == request.app_id)
            ]
        )

    async def ListApps(self, request, context):
        await self._admin(context)
        snap = self.core.snapshot()
        now = self.core.clock()
        return pb.ListAppsResponse(
            apps=[
                app_info_to_pb(
                    a,
                    rho=self.core.rho_current(a.app_id, now),
                    held=self.core.held(a.app_id, now),
                    connected=a.app_id in snap.connected,
                )
                for a in snap.apps.values()
            ]
        )

    async def SetKnob(self, request, context):
        await self._admin(context)
        try:
            key, previous = self.core.set_knob(request.key, request.value)
        except RequestError as err:
            await _abort(context, err, self.core)
        return pb.SetKnobResponse(key=key, value=request.value, previous_value=previous)

    async def DrainNode(self, request, context):
        await self._admin(context)
        try:
            revoked = self.core.drain(request.machine, request.grace_seconds)
        except RequestError as err:
            await _abort(context, err, self.core)
        return pb.DrainNodeResponse(revoked_lease_ids=revoked)

    async def UndrainNode(self, request, context):
        await self._admin(context)
        try:
            was = self.core.undrain(request.machine)
        except RequestError as err:
            await _abort(context, err, self.core)
        return pb.UndrainNodeResponse(was_drained=was)


def _credentials(config: Config) -> grpc.ServerCredentials | None:
    if not config["arbiter.grpc.tls.enabled"]:
        return None
    from pathlib import Path

    def read(key: str) -> bytes:
        path = Path(config[key])
        if not path.is_file():
            raise FileNotFoundError(f"{key} = {path}: no such file")
        return path.read_bytes()

    pair = [(read("arbiter.grpc.tls.key"), read("arbiter.grpc.tls.cert"))]
    import ssl

    try:  # gRPC reports a key that does not match the certificate only as a failed bind
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(
            config["arbiter.grpc.tls.cert"], config["arbiter.grpc.tls.key"]
        )
    except ssl.SSLError as exc:
        raise ValueError(
            f"arbiter.grpc.tls.key {config['arbiter.grpc.tls.key']} does not go with "
            f"arbiter.grpc.tls.cert {config['arbiter.grpc.tls.cert']} (or either is not PEM): "
            f"{exc.reason or exc}"
        ) from None
    if config["arbiter.grpc.tls.client-ca"]:
        return grpc.ssl_server_credentials(
            pair, root_certificates=read("arbiter.grpc.tls.client-ca"), require_client_auth=True
        )
    return grpc.ssl_server_credentials(pair)


async def build_server(
    core: ArbiterCore, interceptors: Sequence[grpc.aio.ServerInterceptor] = ()
) -> tuple[grpc.aio.Server, int]:
    """An asyncio gRPC server for ``core`` (not yet started); returns (server, bound port).
    ``interceptors`` run after the call counter (the telemetry's timing, for ``/metrics``).

    Call it inside the event loop that will run the server. Streams cost no thread: a
    thousand connected Agents are a thousand coroutines.
    """
    limit = core.config["arbiter.grpc.max-message-bytes"]
    server = grpc.aio.server(
        interceptors=[_CountCalls(core), *interceptors],
        options=[
            ("grpc.max_receive_message_length", limit),
            ("grpc.max_send_message_length", limit),
            # gRPC core cancels calls that wait unrequested once 1,000 are pending (its default);
            # a fleet of Agents reconnecting at once is such a burst (measured: 1,500 Agents
            # registering together lost 3% of RegisterApp calls as CANCELLED). Let them queue.
            ("grpc.server.max_pending_requests", 20000),
            ("grpc.server.max_pending_requests_hard_limit", 40000),
            # Clients ping an open stream that carries nothing (a share stream between
            # changes) to learn that its arbiter is gone (CLIENT_KEEPALIVE_S); the default
            # policy answers pings more often than every 5 minutes with GOAWAY "too_many_pings".
            ("grpc.http2.min_ping_interval_without_data_ms", MIN_PING_INTERVAL_MS),
        ],
    )
    _add_appmaster(AppMasterService(core), server)
    rpc.add_QueryShareServicer_to_server(QueryShareService(core), server)
    rpc.add_AdminServicer_to_server(AdminService(core), server)
    health_servicer = health_async.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = ("", "yarnarbiter.v1.AppMaster", "yarnarbiter.v1.QueryShare", "yarnarbiter.v1.Admin")

    async def set_health(healthy: bool) -> None:
        status = health_pb2.HealthCheckResponse.SERVING if healthy else (
            health_pb2.HealthCheckResponse.NOT_SERVING)  # fmt: skip
        for name in names:
            await health_servicer.set(name, status)

    await set_health(core.healthy)
    loop = asyncio.get_running_loop()
    # the core reports a journal that stops (or starts again) committing from any thread

    def on_health(healthy: bool) -> None:
        asyncio.run_coroutine_threadsafe(set_health(healthy), loop)

    core.health_listeners.append(on_health)
    reflection.enable_server_reflection(
        (
            pb.DESCRIPTOR.services_by_name["AppMaster"].full_name,
            pb.DESCRIPTOR.services_by_name["QueryShare"].full_name,
            pb.DESCRIPTOR.services_by_name["Admin"].full_name,
            health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
            reflection.SERVICE_NAME,
        ),
        server,
    )
    host = core.config["arbiter.grpc.bind-host"].strip()
    host = f"[{host}]" if ":" in host and not host.startswith("[") else host
    address = f"{host}:{core.config['arbiter.grpc.port']}"
    creds = _credentials(core.config)
    try:
        port = (
            server.add_secure_port(address, creds) if creds else server.add_insecure_port(address)
        )
    except RuntimeError as exc:  # gRPC's "Failed to bind": in use, or not an address here
        raise OSError(f"gRPC cannot listen on {address} (arbiter.grpc.bind-host, --port)") from exc
    return server, port
