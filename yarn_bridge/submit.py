"""``yarn-arbiter submit``: submit an ML application to YARN under the arbiter (issue 7).

Spec: ``../shared/spec/yarn-hive-integration.md`` §1.1 and §1.5 (``POST /apps/new-application``,
then ``POST /apps`` with an ``ApplicationSubmissionContext``), §1.4 (tags are lower-cased),
§1.8 (GPUs are requested by the AM over AMRM, not at submission); names shared with the AM in
:mod:`yarn_bridge.env`.

What a submission does, in order:

1. ``POST /apps/new-application``: a YARN application id, and the largest container the RM
   grants, against which the AM's memory and vcores are checked (a clear error here rather than
   a 400 later).
2. ``RegisterApp`` on the arbiter (gRPC; TLS when a CA is given): the app's name, user, queue,
   maximum GPU demand (``--gpus``), optionally one job with its gang size, and the YARN id. The
   arbiter answers with its app id and the app's token.
3. ``POST /apps``: the AM command, memory and vcores, queue, priority, application type, tags
   (:data:`~yarn_bridge.env.ML_APP_TAG`, ``yarn-arbiter-app:<app id>`` and the user's), and the
   AM's environment: :data:`~yarn_bridge.env.ENV_ARBITER_ADDRESS`,
   :data:`~yarn_bridge.env.ENV_APP_ID`, :data:`~yarn_bridge.env.ENV_APP_TOKEN`,
   :data:`~yarn_bridge.env.ENV_ARBITER_TLS_CA` (when TLS), plus ``--env`` entries.
4. Print the YARN application id (stdout, alone on its line).

Decisions:

* **new-application before RegisterApp** (rather than registering first): if the RM is down the
  command fails before the arbiter holds a registration nobody will use, and the registration
  can carry the YARN id. An unused YARN id costs nothing.
* **The token** goes only into the AM's environment: never printed, never logged, not in any
  error message (:class:`SubmitError` texts are built without it). The environment is the one
  channel a non-Java AM can read without Hadoop's credential APIs; the RM keeps the submission
  context in its state store, so that store must be protected as the arbiter's journal is.
* **A submission that may have reached the RM** (connection cut after sending,
  :class:`~yarn_bridge.rm.RMUnavailable` from ``submit_app``) is not re-sent; the application id
  is looked up instead, and the command succeeds if the RM knows it.
* **Tags**: lower case (YARN lower-cases them), no commas, at most 100 characters each (YARN's
  limit); the two arbiter tags come first and cannot be given by the user.
* **Reserved environment names**: ``--env`` may not set the four ``YARN_ARBITER_*`` names the
  submitter fills in.
* **If the final submit fails** after ``RegisterApp``, the arbiter keeps an app that never runs:
  it holds no session, so it never receives GPUs; there is no UnregisterApp RPC to remove it.
"""

from __future__ import annotations

import getpass
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Final

import grpc

from protos.yarnarbiter.v1 import arbiter_pb2 as pb
from protos.yarnarbiter.v1 import arbiter_pb2_grpc as rpc
from yarn_bridge.env import (
    ENV_APP_ID,
    ENV_APP_TOKEN,
    ENV_ARBITER_ADDRESS,
    ENV_ARBITER_TLS_CA,
    ML_APP_TAG,
)
from yarn_bridge.rm import AppSubmission, Resource, RMClient, RMError, RMNotFound, RMUnavailable
from yarn_bridge.watcher import arbiter_app_tag

__all__ = [
    "RESERVED_ENV",
    "SubmitError",
    "SubmitSpec",
    "Submitted",
    "am_environment",
    "application_tags",
    "build_submission",
    "channel_credentials",
    "check_resources",
    "register_app",
    "submit_ml_app",
]

log = logging.getLogger("yarn_arbiter.bridge.submit")

RESERVED_ENV: Final = frozenset(
    {ENV_ARBITER_ADDRESS, ENV_APP_ID, ENV_APP_TOKEN, ENV_ARBITER_TLS_CA}
)
MAX_TAG_LENGTH: Final = 100  # YarnConfiguration.APPLICATION_MAX_TAG_LENGTH


class SubmitError(Exception):
    """The submission could not be made; the message says which step and why (never the
    token)."""


def _empty() -> Mapping[str, str]:
    return MappingProxyType({})


@dataclass(frozen=True)
class SubmitSpec:
    """What to submit. ``max_gpus`` is the app's maximum GPU demand in the arbiter (the AM asks
    YARN for GPU containers itself once leased); ``gang_size`` > 0 declares one job that needs
    that many GPUs to run at all."""

    name: str
    command: str
    max_gpus: int
    queue: str = "default"
    priority: int = 0
    memory_mb: int = 1024
    vcores: int = 1
    tags: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=_empty)
    application_type: str = "YARN"
    max_app_attempts: int = 1
    user: str = ""
    gang_size: int = 0

    def validate(self) -> None:
        if not self.name.strip():
            raise SubmitError("the application name is empty")
        if not self.command.strip():
            raise SubmitError("the AM command is empty")
        if self.max_gpus < 1:
            raise SubmitError(f"--gpus must be >= 1, got {self.max_gpus}")
        if self.gang_size < 0 or self.gang_size > self.max_gpus:
            raise SubmitError(f"--gang-size must be in [0, {self.max_gpus}], got {self.gang_size}")
        if self.memory_mb < 1 or self.vcores < 1:
            raise SubmitError("--memory-mb and --vcores must be >= 1")
        if self.max_app_attempts < 1:
            raise SubmitError("--max-attempts must be >= 1")
        clash = sorted(RESERVED_ENV & set(self.env))
        if clash:
            raise SubmitError(f"--env cannot set {', '.join(clash)}: the submitter fills it in")


@dataclass(frozen=True, slots=True)
class Submitted:
    """The outcome: the YARN application id and the arbiter's app id (the token is not kept)."""

    yarn_app_id: str
    arbiter_app_id: str


def application_tags(spec_tags: Iterable[str], arbiter_app_id: str) -> tuple[str, ...]:
    """The app's YARN tags: the ML tag, the arbiter link, then the user's (lower case, unique).

    >>> application_tags(["Team-A", "yarn-arbiter-ml"], "app-1")
    ('yarn-arbiter-ml', 'yarn-arbiter-app:app-1', 'team-a')
    """
    tags = [ML_APP_TAG, arbiter_app_tag(arbiter_app_id)]
    for raw in spec_tags:
        t = raw.strip().lower()
        if not t:
            continue
        if "," in t or len(t) > MAX_TAG_LENGTH or not t.isascii():
            raise SubmitError(
                f"tag {raw!r}: YARN tags are ASCII, without commas, at most {MAX_TAG_LENGTH} chars"
            )
        if t.startswith("yarn-arbiter-app:"):
            raise SubmitError(f"tag {raw!r}: the arbiter link tag is set by the submitter")
        tags.append(t)
    return tuple(dict.fromkeys(tags))


def am_environment(
    env: Mapping[str, str],
    *,
    arbiter_address: str,
    arbiter_app_id: str,
    token: str,
    tls_ca: str | None,
) -> dict[str, str]:
    """The AM container's environment: the user's entries and the arbiter's four names."""
    out = dict(env)
    out[ENV_ARBITER_ADDRESS] = arbiter_address
    out[ENV_APP_ID] = arbiter_app_id
    out[ENV_APP_TOKEN] = token
    if tls_ca:
        out[ENV_ARBITER_TLS_CA] = tls_ca
    return out


def build_submission(
    spec: SubmitSpec,
    *,
    yarn_app_id: str,
    arbiter_app_id: str,
    token: str,
    arbiter_address: str,
    tls_ca: str | None = None,
) -> AppSubmission:
    """The ``POST /apps`` context for ``spec`` (pure)."""
    return AppSubmission(
        application_id=yarn_app_id,
        name=spec.name,
        command=spec.command,
        queue=spec.queue,
        memory_mb=spec.memory_mb,
        vcores=spec.vcores,
        priority=spec.priority,
        application_type=spec.application_type,
        tags=application_tags(spec.tags, arbiter_app_id),
        environment=am_environment(
            spec.env,
            arbiter_address=arbiter_address,
            arbiter_app_id=arbiter_app_id,
            token=token,
            tls_ca=tls_ca,
        ),
        max_app_attempts=spec.max_app_attempts,
    )


def check_resources(spec: SubmitSpec, maximum: Resource) -> None:
    """The AM container must fit the RM's maximum allocation (``new-application``)."""
    if maximum.memory_mb and spec.memory_mb > maximum.memory_mb:
        raise SubmitError(
            f"--memory-mb {spec.memory_mb} exceeds the RM's maximum container memory "
            f"{maximum.memory_mb} MB"
        )
    if maximum.vcores and spec.vcores > maximum.vcores:
        raise SubmitError(
            f"--vcores {spec.vcores} exceeds the RM's maximum container vcores {maximum.vcores}"
        )


def channel_credentials(
    tls_ca: str | None, tls_cert: str | None = None, tls_key: str | None = None
) -> grpc.ChannelCredentials | None:
    """TLS credentials for the arbiter (``None``: plaintext). A client certificate and key are
    needed when the arbiter requires mutual TLS (``arbiter.grpc.tls.client-ca``)."""
    if not (tls_ca or tls_cert or tls_key):
        return None
    if bool(tls_cert) != bool(tls_key):
        raise SubmitError("--tls-cert and --tls-key go together")

    def read(path: str | None, what: str) -> bytes | None:
        if not path:
            return None
        try:
            return Path(path).read_bytes()
        except OSError as exc:
            raise SubmitError(f"{what} {path}: {exc.strerror or exc}") from None

    return grpc.ssl_channel_credentials(
        root_certificates=read(tls_ca, "--tls-ca"),
        private_key=read(tls_key, "--tls-key"),
        certificate_chain=read(tls_cert, "--tls-cert"),
    )


def register_app(
    spec: SubmitSpec,
    arbiter_address: str,
    *,
    yarn_app_id: str = "",
    credentials: grpc.ChannelCredentials | None = None,
    timeout: float = 10.0,
) -> tuple[str, str]:
    """``RegisterApp`` on the arbiter; returns (app id, token)."""
    jobs = []
    if spec.gang_size > 0:
        jobs.append(pb.JobSpec(job_id="main", gang_size=spec.gang_size, max_gpus=spec.max_gpus))
    request = pb.RegisterAppRequest(
        app_name=spec.name,
        user=spec.user,
        queue=spec.queue,
        max_gpu_demand=spec.max_gpus,
        jobs=jobs,
        yarn_application_id=yarn_app_id,
    )
    channel = (
        grpc.secure_channel(arbiter_address, credentials)
        if credentials is not None
        else grpc.insecure_channel(arbiter_address)
    )
    try:
        reply = rpc.AppMasterStub(channel).RegisterApp(request, timeout=timeout)
    except grpc.RpcError as exc:
        code = exc.code().name if hasattr(exc, "code") else "UNKNOWN"
        detail = exc.details() if hasattr(exc, "details") else str(exc)
        raise SubmitError(
            f"RegisterApp on the arbiter at {arbiter_address} failed: {code}: {detail}"
        ) from None
    finally:
        channel.close()
    return reply.app_id, reply.app_token


def submit_ml_app(
    spec: SubmitSpec,
    rm: RMClient,
    *,
    arbiter_address: str,
    credentials: grpc.ChannelCredentials | None = None,
    am_arbiter_address: str | None = None,
    am_tls_ca: str | None = None,
    timeout: float = 10.0,
) -> Submitted:
    """Submit ``spec`` (module docstring). ``arbiter_address`` is where this process reaches
    the arbiter; ``am_arbiter_address`` where the AM does (default the same); ``am_tls_ca`` the
    CA path as the AM container sees it (set when the arbiter serves TLS)."""
    spec.validate()
    try:
        new = rm.new_application()
    except RMError as exc:
        raise SubmitError(f"new-application on the RM failed: {exc}") from None
    check_resources(spec, new.maximum_capability)
    app_id, token = register_app(
        spec,
        arbiter_address,
        yarn_app_id=new.application_id,
        credentials=credentials,
        timeout=timeout,
    )
    log.info("registered %s with the arbiter as %s", new.application_id, app_id)
    submission = build_submission(
        spec,
        yarn_app_id=new.application_id,
        arbiter_app_id=app_id,
        token=token,
        arbiter_address=am_arbiter_address or arbiter_address,
        tls_ca=am_tls_ca,
    )
    try:
        yarn_id = rm.submit_app(submission)
    except RMUnavailable as exc:
        # It may have reached the RM: look it up rather than submit twice.
        try:
            yarn_id = rm.app(new.application_id).id
        except RMNotFound:
            raise SubmitError(
                f"submitting {new.application_id} failed ({exc.detail}); the RM does not know "
                f"it (arbiter app {app_id} stays registered without a YARN app)"
            ) from None
        except RMError as again:
            raise SubmitError(
                f"submitting {new.application_id} failed and its fate is unknown: {again}"
            ) from None
    except RMError as exc:
        raise SubmitError(
            f"submitting {new.application_id} failed: {exc} (arbiter app {app_id} stays "
            "registered without a YARN app)"
        ) from None
    log.info("submitted %s (arbiter app %s) to queue %s", yarn_id, app_id, spec.queue)
    return Submitted(yarn_id, app_id)


def default_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return ""
