from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LeaseSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LEASE_SOURCE_UNSPECIFIED: _ClassVar[LeaseSource]
    LEASE_SOURCE_AUCTION: _ClassVar[LeaseSource]
    LEASE_SOURCE_LEFTOVER: _ClassVar[LeaseSource]
    LEASE_SOURCE_POLICY: _ClassVar[LeaseSource]

class ShareCause(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SHARE_CAUSE_UNSPECIFIED: _ClassVar[ShareCause]
    SHARE_CAUSE_SUBSCRIBED: _ClassVar[ShareCause]
    SHARE_CAUSE_JOB_ARRIVED: _ClassVar[ShareCause]
    SHARE_CAUSE_JOB_DEPARTED: _ClassVar[ShareCause]
    SHARE_CAUSE_CAPACITY_CHANGED: _ClassVar[ShareCause]
LEASE_SOURCE_UNSPECIFIED: LeaseSource
LEASE_SOURCE_AUCTION: LeaseSource
LEASE_SOURCE_LEFTOVER: LeaseSource
LEASE_SOURCE_POLICY: LeaseSource
SHARE_CAUSE_UNSPECIFIED: ShareCause
SHARE_CAUSE_SUBSCRIBED: ShareCause
SHARE_CAUSE_JOB_ARRIVED: ShareCause
SHARE_CAUSE_JOB_DEPARTED: ShareCause
SHARE_CAUSE_CAPACITY_CHANGED: ShareCause

class Gpu(_message.Message):
    __slots__ = ("id", "slot", "machine", "rack", "gpu_type")
    ID_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    MACHINE_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    GPU_TYPE_FIELD_NUMBER: _ClassVar[int]
    id: str
    slot: str
    machine: str
    rack: str
    gpu_type: str
    def __init__(self, id: _Optional[str] = ..., slot: _Optional[str] = ..., machine: _Optional[str] = ..., rack: _Optional[str] = ..., gpu_type: _Optional[str] = ...) -> None: ...

class Lease(_message.Message):
    __slots__ = ("lease_id", "app_id", "gpu_ids", "start_unix_s", "end_unix_s", "round", "source")
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    GPU_IDS_FIELD_NUMBER: _ClassVar[int]
    START_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    END_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    lease_id: str
    app_id: str
    gpu_ids: _containers.RepeatedScalarFieldContainer[str]
    start_unix_s: float
    end_unix_s: float
    round: int
    source: LeaseSource
    def __init__(self, lease_id: _Optional[str] = ..., app_id: _Optional[str] = ..., gpu_ids: _Optional[_Iterable[str]] = ..., start_unix_s: _Optional[float] = ..., end_unix_s: _Optional[float] = ..., round: _Optional[int] = ..., source: _Optional[_Union[LeaseSource, str]] = ...) -> None: ...

class JobSpec(_message.Message):
    __slots__ = ("job_id", "gang_size", "max_gpus", "iters_total", "serial_iter_time_s")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    GANG_SIZE_FIELD_NUMBER: _ClassVar[int]
    MAX_GPUS_FIELD_NUMBER: _ClassVar[int]
    ITERS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    SERIAL_ITER_TIME_S_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    gang_size: int
    max_gpus: int
    iters_total: int
    serial_iter_time_s: float
    def __init__(self, job_id: _Optional[str] = ..., gang_size: _Optional[int] = ..., max_gpus: _Optional[int] = ..., iters_total: _Optional[int] = ..., serial_iter_time_s: _Optional[float] = ...) -> None: ...

class RegisterAppRequest(_message.Message):
    __slots__ = ("app_name", "user", "queue", "max_gpu_demand", "jobs", "yarn_application_id")
    APP_NAME_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    MAX_GPU_DEMAND_FIELD_NUMBER: _ClassVar[int]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    YARN_APPLICATION_ID_FIELD_NUMBER: _ClassVar[int]
    app_name: str
    user: str
    queue: str
    max_gpu_demand: int
    jobs: _containers.RepeatedCompositeFieldContainer[JobSpec]
    yarn_application_id: str
    def __init__(self, app_name: _Optional[str] = ..., user: _Optional[str] = ..., queue: _Optional[str] = ..., max_gpu_demand: _Optional[int] = ..., jobs: _Optional[_Iterable[_Union[JobSpec, _Mapping]]] = ..., yarn_application_id: _Optional[str] = ...) -> None: ...

class RegisterAppResponse(_message.Message):
    __slots__ = ("app_id", "app_token", "lease_seconds", "heartbeat_timeout_s")
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    APP_TOKEN_FIELD_NUMBER: _ClassVar[int]
    LEASE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    app_token: str
    lease_seconds: float
    heartbeat_timeout_s: float
    def __init__(self, app_id: _Optional[str] = ..., app_token: _Optional[str] = ..., lease_seconds: _Optional[float] = ..., heartbeat_timeout_s: _Optional[float] = ...) -> None: ...

class RhoQuery(_message.Message):
    __slots__ = ("round",)
    ROUND_FIELD_NUMBER: _ClassVar[int]
    round: int
    def __init__(self, round: _Optional[int] = ...) -> None: ...

class RhoReport(_message.Message):
    __slots__ = ("round", "rho")
    ROUND_FIELD_NUMBER: _ClassVar[int]
    RHO_FIELD_NUMBER: _ClassVar[int]
    round: int
    rho: float
    def __init__(self, round: _Optional[int] = ..., rho: _Optional[float] = ...) -> None: ...

class Offer(_message.Message):
    __slots__ = ("round", "gpus", "lease_seconds", "bid_deadline_unix_s")
    ROUND_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    LEASE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    BID_DEADLINE_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    round: int
    gpus: _containers.RepeatedCompositeFieldContainer[Gpu]
    lease_seconds: float
    bid_deadline_unix_s: float
    def __init__(self, round: _Optional[int] = ..., gpus: _Optional[_Iterable[_Union[Gpu, _Mapping]]] = ..., lease_seconds: _Optional[float] = ..., bid_deadline_unix_s: _Optional[float] = ...) -> None: ...

class BidRow(_message.Message):
    __slots__ = ("gpu_ids", "rho")
    GPU_IDS_FIELD_NUMBER: _ClassVar[int]
    RHO_FIELD_NUMBER: _ClassVar[int]
    gpu_ids: _containers.RepeatedScalarFieldContainer[str]
    rho: float
    def __init__(self, gpu_ids: _Optional[_Iterable[str]] = ..., rho: _Optional[float] = ...) -> None: ...

class Bid(_message.Message):
    __slots__ = ("round", "rho_old", "rows")
    ROUND_FIELD_NUMBER: _ClassVar[int]
    RHO_OLD_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    round: int
    rho_old: float
    rows: _containers.RepeatedCompositeFieldContainer[BidRow]
    def __init__(self, round: _Optional[int] = ..., rho_old: _Optional[float] = ..., rows: _Optional[_Iterable[_Union[BidRow, _Mapping]]] = ...) -> None: ...

class Allocation(_message.Message):
    __slots__ = ("round", "leases", "hidden_payment")
    ROUND_FIELD_NUMBER: _ClassVar[int]
    LEASES_FIELD_NUMBER: _ClassVar[int]
    HIDDEN_PAYMENT_FIELD_NUMBER: _ClassVar[int]
    round: int
    leases: _containers.RepeatedCompositeFieldContainer[Lease]
    hidden_payment: float
    def __init__(self, round: _Optional[int] = ..., leases: _Optional[_Iterable[_Union[Lease, _Mapping]]] = ..., hidden_payment: _Optional[float] = ...) -> None: ...

class Revocation(_message.Message):
    __slots__ = ("lease_id", "gpu_ids", "grace_seconds", "reason", "original_lease_id", "remainder")
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    GPU_IDS_FIELD_NUMBER: _ClassVar[int]
    GRACE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    REMAINDER_FIELD_NUMBER: _ClassVar[int]
    lease_id: str
    gpu_ids: _containers.RepeatedScalarFieldContainer[str]
    grace_seconds: float
    reason: str
    original_lease_id: str
    remainder: Lease
    def __init__(self, lease_id: _Optional[str] = ..., gpu_ids: _Optional[_Iterable[str]] = ..., grace_seconds: _Optional[float] = ..., reason: _Optional[str] = ..., original_lease_id: _Optional[str] = ..., remainder: _Optional[_Union[Lease, _Mapping]] = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ("sent_unix_s", "seq", "want_ack", "progress")
    SENT_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    WANT_ACK_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    sent_unix_s: float
    seq: int
    want_ack: bool
    progress: _containers.RepeatedCompositeFieldContainer[ProgressReport]
    def __init__(self, sent_unix_s: _Optional[float] = ..., seq: _Optional[int] = ..., want_ack: _Optional[bool] = ..., progress: _Optional[_Iterable[_Union[ProgressReport, _Mapping]]] = ...) -> None: ...

class HeartbeatAck(_message.Message):
    __slots__ = ("seq", "rho")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    RHO_FIELD_NUMBER: _ClassVar[int]
    seq: int
    rho: float
    def __init__(self, seq: _Optional[int] = ..., rho: _Optional[float] = ...) -> None: ...

class SessionHello(_message.Message):
    __slots__ = ("app_id", "resume_after_round")
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    RESUME_AFTER_ROUND_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    resume_after_round: int
    def __init__(self, app_id: _Optional[str] = ..., resume_after_round: _Optional[int] = ...) -> None: ...

class AgentMessage(_message.Message):
    __slots__ = ("hello", "rho_report", "bid", "heartbeat")
    HELLO_FIELD_NUMBER: _ClassVar[int]
    RHO_REPORT_FIELD_NUMBER: _ClassVar[int]
    BID_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    hello: SessionHello
    rho_report: RhoReport
    bid: Bid
    heartbeat: Heartbeat
    def __init__(self, hello: _Optional[_Union[SessionHello, _Mapping]] = ..., rho_report: _Optional[_Union[RhoReport, _Mapping]] = ..., bid: _Optional[_Union[Bid, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ...) -> None: ...

class SessionError(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class ArbiterMessage(_message.Message):
    __slots__ = ("rho_query", "offer", "allocation", "revocation", "error", "heartbeat_ack")
    RHO_QUERY_FIELD_NUMBER: _ClassVar[int]
    OFFER_FIELD_NUMBER: _ClassVar[int]
    ALLOCATION_FIELD_NUMBER: _ClassVar[int]
    REVOCATION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_ACK_FIELD_NUMBER: _ClassVar[int]
    rho_query: RhoQuery
    offer: Offer
    allocation: Allocation
    revocation: Revocation
    error: SessionError
    heartbeat_ack: HeartbeatAck
    def __init__(self, rho_query: _Optional[_Union[RhoQuery, _Mapping]] = ..., offer: _Optional[_Union[Offer, _Mapping]] = ..., allocation: _Optional[_Union[Allocation, _Mapping]] = ..., revocation: _Optional[_Union[Revocation, _Mapping]] = ..., error: _Optional[_Union[SessionError, _Mapping]] = ..., heartbeat_ack: _Optional[_Union[HeartbeatAck, _Mapping]] = ...) -> None: ...

class RenewLeaseRequest(_message.Message):
    __slots__ = ("lease_id",)
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    lease_id: str
    def __init__(self, lease_id: _Optional[str] = ...) -> None: ...

class RenewLeaseResponse(_message.Message):
    __slots__ = ("lease",)
    LEASE_FIELD_NUMBER: _ClassVar[int]
    lease: Lease
    def __init__(self, lease: _Optional[_Union[Lease, _Mapping]] = ...) -> None: ...

class ReleaseLeaseRequest(_message.Message):
    __slots__ = ("lease_id", "gpu_ids")
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    GPU_IDS_FIELD_NUMBER: _ClassVar[int]
    lease_id: str
    gpu_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, lease_id: _Optional[str] = ..., gpu_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ReleaseLeaseResponse(_message.Message):
    __slots__ = ("released_gpu_ids",)
    RELEASED_GPU_IDS_FIELD_NUMBER: _ClassVar[int]
    released_gpu_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, released_gpu_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ProgressReport(_message.Message):
    __slots__ = ("job_id", "iters_done", "iters_remaining", "iter_time_s", "placement_gpu_ids", "loss")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ITERS_DONE_FIELD_NUMBER: _ClassVar[int]
    ITERS_REMAINING_FIELD_NUMBER: _ClassVar[int]
    ITER_TIME_S_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_GPU_IDS_FIELD_NUMBER: _ClassVar[int]
    LOSS_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    iters_done: int
    iters_remaining: int
    iter_time_s: float
    placement_gpu_ids: _containers.RepeatedScalarFieldContainer[str]
    loss: float
    def __init__(self, job_id: _Optional[str] = ..., iters_done: _Optional[int] = ..., iters_remaining: _Optional[int] = ..., iter_time_s: _Optional[float] = ..., placement_gpu_ids: _Optional[_Iterable[str]] = ..., loss: _Optional[float] = ...) -> None: ...

class ProgressAck(_message.Message):
    __slots__ = ("rho",)
    RHO_FIELD_NUMBER: _ClassVar[int]
    rho: float
    def __init__(self, rho: _Optional[float] = ...) -> None: ...

class ResourceVector(_message.Message):
    __slots__ = ("vcores", "memory_mb", "disk_mb_per_s", "network_mb_per_s")
    VCORES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_MB_FIELD_NUMBER: _ClassVar[int]
    DISK_MB_PER_S_FIELD_NUMBER: _ClassVar[int]
    NETWORK_MB_PER_S_FIELD_NUMBER: _ClassVar[int]
    vcores: float
    memory_mb: float
    disk_mb_per_s: float
    network_mb_per_s: float
    def __init__(self, vcores: _Optional[float] = ..., memory_mb: _Optional[float] = ..., disk_mb_per_s: _Optional[float] = ..., network_mb_per_s: _Optional[float] = ...) -> None: ...

class RegisterQueryRequest(_message.Message):
    __slots__ = ("query_name", "user", "queue")
    QUERY_NAME_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    query_name: str
    user: str
    queue: str
    def __init__(self, query_name: _Optional[str] = ..., user: _Optional[str] = ..., queue: _Optional[str] = ...) -> None: ...

class RegisterQueryResponse(_message.Message):
    __slots__ = ("job_id", "job_token")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_TOKEN_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_token: str
    def __init__(self, job_id: _Optional[str] = ..., job_token: _Optional[str] = ...) -> None: ...

class SubscribeShareRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class ShareUpdate(_message.Message):
    __slots__ = ("job_id", "epoch", "fair_share", "active_jobs", "cause")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    FAIR_SHARE_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_JOBS_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    epoch: int
    fair_share: ResourceVector
    active_jobs: int
    cause: ShareCause
    def __init__(self, job_id: _Optional[str] = ..., epoch: _Optional[int] = ..., fair_share: _Optional[_Union[ResourceVector, _Mapping]] = ..., active_jobs: _Optional[int] = ..., cause: _Optional[_Union[ShareCause, str]] = ...) -> None: ...

class UnregisterQueryRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class UnregisterQueryResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PlanSwitchReport(_message.Message):
    __slots__ = ("job_id", "at_s", "from_plan", "to_plan", "share", "cancelled_stages", "reused_stages")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    AT_S_FIELD_NUMBER: _ClassVar[int]
    FROM_PLAN_FIELD_NUMBER: _ClassVar[int]
    TO_PLAN_FIELD_NUMBER: _ClassVar[int]
    SHARE_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_STAGES_FIELD_NUMBER: _ClassVar[int]
    REUSED_STAGES_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    at_s: float
    from_plan: str
    to_plan: str
    share: ResourceVector
    cancelled_stages: _containers.RepeatedScalarFieldContainer[str]
    reused_stages: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, job_id: _Optional[str] = ..., at_s: _Optional[float] = ..., from_plan: _Optional[str] = ..., to_plan: _Optional[str] = ..., share: _Optional[_Union[ResourceVector, _Mapping]] = ..., cancelled_stages: _Optional[_Iterable[str]] = ..., reused_stages: _Optional[_Iterable[str]] = ...) -> None: ...

class PlanSwitchAck(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ClusterStateRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ClusterState(_message.Message):
    __slots__ = ("cluster_name", "gpus", "free_gpu_ids", "drained_machines", "round", "policy")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    FREE_GPU_IDS_FIELD_NUMBER: _ClassVar[int]
    DRAINED_MACHINES_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    gpus: _containers.RepeatedCompositeFieldContainer[Gpu]
    free_gpu_ids: _containers.RepeatedScalarFieldContainer[str]
    drained_machines: _containers.RepeatedScalarFieldContainer[str]
    round: int
    policy: str
    def __init__(self, cluster_name: _Optional[str] = ..., gpus: _Optional[_Iterable[_Union[Gpu, _Mapping]]] = ..., free_gpu_ids: _Optional[_Iterable[str]] = ..., drained_machines: _Optional[_Iterable[str]] = ..., round: _Optional[int] = ..., policy: _Optional[str] = ...) -> None: ...

class ListLeasesRequest(_message.Message):
    __slots__ = ("app_id",)
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    def __init__(self, app_id: _Optional[str] = ...) -> None: ...

class ListLeasesResponse(_message.Message):
    __slots__ = ("leases",)
    LEASES_FIELD_NUMBER: _ClassVar[int]
    leases: _containers.RepeatedCompositeFieldContainer[Lease]
    def __init__(self, leases: _Optional[_Iterable[_Union[Lease, _Mapping]]] = ...) -> None: ...

class AppInfo(_message.Message):
    __slots__ = ("app_id", "app_name", "user", "queue", "max_gpu_demand", "rho", "held_gpu_ids", "connected")
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    APP_NAME_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    MAX_GPU_DEMAND_FIELD_NUMBER: _ClassVar[int]
    RHO_FIELD_NUMBER: _ClassVar[int]
    HELD_GPU_IDS_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    app_name: str
    user: str
    queue: str
    max_gpu_demand: int
    rho: float
    held_gpu_ids: _containers.RepeatedScalarFieldContainer[str]
    connected: bool
    def __init__(self, app_id: _Optional[str] = ..., app_name: _Optional[str] = ..., user: _Optional[str] = ..., queue: _Optional[str] = ..., max_gpu_demand: _Optional[int] = ..., rho: _Optional[float] = ..., held_gpu_ids: _Optional[_Iterable[str]] = ..., connected: _Optional[bool] = ...) -> None: ...

class ListAppsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListAppsResponse(_message.Message):
    __slots__ = ("apps",)
    APPS_FIELD_NUMBER: _ClassVar[int]
    apps: _containers.RepeatedCompositeFieldContainer[AppInfo]
    def __init__(self, apps: _Optional[_Iterable[_Union[AppInfo, _Mapping]]] = ...) -> None: ...

class SetKnobRequest(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class SetKnobResponse(_message.Message):
    __slots__ = ("key", "value", "previous_value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    previous_value: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ..., previous_value: _Optional[str] = ...) -> None: ...

class DrainNodeRequest(_message.Message):
    __slots__ = ("machine", "grace_seconds")
    MACHINE_FIELD_NUMBER: _ClassVar[int]
    GRACE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    machine: str
    grace_seconds: float
    def __init__(self, machine: _Optional[str] = ..., grace_seconds: _Optional[float] = ...) -> None: ...

class DrainNodeResponse(_message.Message):
    __slots__ = ("revoked_lease_ids",)
    REVOKED_LEASE_IDS_FIELD_NUMBER: _ClassVar[int]
    revoked_lease_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, revoked_lease_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class UndrainNodeRequest(_message.Message):
    __slots__ = ("machine",)
    MACHINE_FIELD_NUMBER: _ClassVar[int]
    machine: str
    def __init__(self, machine: _Optional[str] = ...) -> None: ...

class UndrainNodeResponse(_message.Message):
    __slots__ = ("was_drained",)
    WAS_DRAINED_FIELD_NUMBER: _ClassVar[int]
    was_drained: bool
    def __init__(self, was_drained: _Optional[bool] = ...) -> None: ...
