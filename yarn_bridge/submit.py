"""``yarn-arbiter submit``: submit an ML application to YARN under the arbiter.

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

**The AM.** By default the AM is ours (:class:`LeaseAM`): the Java ApplicationMaster of
``java/am`` (``org.yarnarbiter.am.LeaseApplicationMaster``, the jar shipped as a local resource,
run on the cluster's ``yarn.application.classpath``) with ``python -m yarn_bridge.lease_am`` as
its sidecar, which bids for GPU leases and turns each into YARN containers running the user's
job command (``--command``); protocol in :mod:`yarn_bridge.am_protocol`. A user's own AM command
can still be submitted instead (``--am-command``, the earlier behaviour). ``--file`` /
``--archive`` ship local files as YARN local resources (``file://`` URLs: the cluster's default
file system is local, or the path is on a shared mount; size and timestamp from the file) to
the AM and, under our AM, to every job container too.

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
* **A Java AM in the repository rather than Skein.** Skein would need ``yarn classpath --glob``
  and a driver JVM beside every client, ships Java 8 jars built against an old Hadoop (with
  grpc-java inside), and has no notion of a per-lease container with strict locality that is
  released when the lease is. Ours is two small classes (about 700 lines with comments), plain
  ``AMRMClientAsync`` + ``NMClientAsync``, Java 8 bytecode compiled against the Hadoop 3.4.1
  client API (it runs on the cluster's own Hadoop jars: no shading, no grpc-java), and keeps
  every decision about leases in Python, next to the Agent.
* **The job command reaches the sidecar base64-encoded** (``--command-b64``): the NodeManager
  writes environment values into the launch script as ``export K="V"`` without escaping, so a
  ``$`` or a quote in a command would otherwise be expanded or break the script. For the same
  reason ``--python`` and ``--sidecar-arg`` may not hold ``"``, ``$``, a backquote or a
  backslash (``--java`` and the classpath may hold ``$``: the container's variables). The
  containers' own command line has the same problem (``exec /bin/bash -c "..."``); the Java AM
  escapes it.
* **The classpath** comes from ``yarn.application.classpath`` in
  ``$HADOOP_CONF_DIR/yarn-site.xml`` (Hadoop's default list when unset), ``./*`` first for the
  shipped jar; ``--am-classpath`` overrides it. The AM's ``java`` is
  ``${JAVA_HOME:-J}/bin/java``: the NodeManager's ``JAVA_HOME`` (whitelisted into containers),
  else the submitter's ``J``.
"""

from __future__ import annotations

import base64
import getpass
import logging
import os
import shlex
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Final

import grpc

from arbiter.agent import arbiter_addresses
from arbiter.wire.appmaster import job_to_pb
from protos.yarnarbiter.v1 import arbiter_pb2 as pb
from protos.yarnarbiter.v1 import arbiter_pb2_grpc as rpc
from yarn_bridge.am_protocol import ENV_LOCAL_RESOURCES, ENV_SIDECAR
from yarn_bridge.env import (
    ENV_APP_ID,
    ENV_APP_TOKEN,
    ENV_ARBITER_ADDRESS,
    ENV_ARBITER_TLS_CA,
    ML_APP_TAG,
)
from yarn_bridge.rm import (
    AppSubmission,
    LocalResource,
    Resource,
    RMClient,
    RMError,
    RMNotFound,
    RMUnavailable,
)
from yarn_bridge.rm_events import arbiter_app_tag

__all__ = [
    "AM_MAIN_CLASS",
    "DEFAULT_APPLICATION_CLASSPATH",
    "RESERVED_ENV",
    "LeaseAM",
    "SubmitError",
    "SubmitSpec",
    "Submitted",
    "am_environment",
    "application_classpath",
    "application_tags",
    "build_submission",
    "channel_credentials",
    "check_resources",
    "default_am_jar",
    "local_resource",
    "local_resources",
    "register_app",
    "submit_ml_app",
]

log = logging.getLogger("yarn_arbiter.bridge.submit")

RESERVED_ENV: Final = frozenset(
    {ENV_ARBITER_ADDRESS, ENV_APP_ID, ENV_APP_TOKEN, ENV_ARBITER_TLS_CA, ENV_SIDECAR,
     ENV_LOCAL_RESOURCES}
)  # fmt: skip
MAX_TAG_LENGTH: Final = 100  # YarnConfiguration.APPLICATION_MAX_TAG_LENGTH
AM_MAIN_CLASS: Final = "org.yarnarbiter.am.LeaseApplicationMaster"
AM_JAR_NAME: Final = "yarn-arbiter-am.jar"
ENV_AM_JAR: Final = "YARN_ARBITER_AM_JAR"  # read by submit only: where the built jar is
# YarnConfiguration.DEFAULT_YARN_CROSS_PLATFORM_APPLICATION_CLASSPATH, as the NM expands it.
DEFAULT_APPLICATION_CLASSPATH: Final = (
    "$HADOOP_CONF_DIR",
    "$HADOOP_COMMON_HOME/share/hadoop/common/*",
    "$HADOOP_COMMON_HOME/share/hadoop/common/lib/*",
    "$HADOOP_HDFS_HOME/share/hadoop/hdfs/*",
    "$HADOOP_HDFS_HOME/share/hadoop/hdfs/lib/*",
    "$HADOOP_YARN_HOME/share/hadoop/yarn/*",
    "$HADOOP_YARN_HOME/share/hadoop/yarn/lib/*",
)
_UNSAFE_IN_ENV: Final = frozenset('"`\\\n')  # the launch script's export K="V" (no escaping)


class SubmitError(Exception):
    """The submission could not be made; the message says which step and why (never the
    token)."""


def _empty() -> Mapping[str, str]:
    return MappingProxyType({})


@dataclass(frozen=True)
class LeaseAM:
    """Our AM (module docstring): the Java AM from ``jar`` on ``classpath`` (entries as the
    container sees them), with ``python -m yarn_bridge.lease_am`` as its sidecar running the
    job. ``sidecar_args`` are passed on to the sidecar (e.g. ``--hold-seconds 5``)."""

    jar: str
    classpath: tuple[str, ...] = DEFAULT_APPLICATION_CLASSPATH
    java: str = "$JAVA_HOME/bin/java"
    python: str = field(default_factory=lambda: sys.executable)
    heap_mb: int = 256
    work_gpu_seconds: float = 3600.0
    sidecar_args: tuple[str, ...] = ()

    def validate(self) -> None:
        if not Path(self.jar).is_file():
            raise SubmitError(
                f"the AM jar {self.jar} does not exist: build it with "
                "`mvn -q -f java/am/pom.xml package -DskipTests` or give --am-jar"
            )
        if not self.classpath:
            raise SubmitError("the AM classpath is empty")
        for what, value in (("--am-classpath", ":".join(self.classpath)), ("--java", self.java)):
            if set(value) & _UNSAFE_IN_ENV:
                raise SubmitError(f"{what} {value!r}: no quotes, backquotes or backslashes")
        for what, value in (
            ("--python", self.python),
            *(("--sidecar-arg", a) for a in self.sidecar_args),
        ):
            if set(value) & (_UNSAFE_IN_ENV | {"$"}):
                raise SubmitError(f"{what} {value!r}: no quotes, $, backquotes or backslashes")
        if self.heap_mb < 64 or not self.work_gpu_seconds > 0:
            raise SubmitError("the AM heap must be >= 64 MB and the work > 0 GPU-seconds")

    def am_command(self) -> str:
        """The AM container's command (the NM runs it through bash: ``$JAVA_HOME`` expands)."""
        return (
            f"{self.java} -Xmx{self.heap_mb}m {AM_MAIN_CLASS} "
            "1><LOG_DIR>/AppMaster.stdout 2><LOG_DIR>/AppMaster.stderr"
        )

    def sidecar_command(self, job_command: str, max_gpus: int) -> str:
        """What the AM runs as its sidecar (``bash -c``): the job command base64-encoded."""
        b64 = base64.b64encode(job_command.encode()).decode("ascii")
        argv = [self.python, "-m", "yarn_bridge.lease_am", "--gpus", str(max_gpus),
                "--work-gpu-seconds", f"{self.work_gpu_seconds:g}", "--command-b64", b64,
                *self.sidecar_args]  # fmt: skip
        return shlex.join(argv)

    def environment(self) -> dict[str, str]:
        return {"CLASSPATH": ":".join(("./*", *self.classpath))}


@dataclass(frozen=True)
class SubmitSpec:
    """What to submit. ``max_gpus`` is the app's maximum GPU demand in the arbiter (the AM asks
    YARN for GPU containers itself once leased); ``gang_size`` > 0 declares one job that needs
    that many GPUs to run at all. With ``lease_am`` the AM is ours and ``command`` is the job
    it runs in the leased containers; without, ``command`` is the user's own AM command.
    ``files`` / ``archives`` are local paths shipped as local resources."""

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
    files: tuple[str, ...] = ()
    archives: tuple[str, ...] = ()
    lease_am: LeaseAM | None = None

    def validate(self) -> None:
        if not self.name.strip():
            raise SubmitError("the application name is empty")
        if not self.command.strip():
            raise SubmitError(
                "the job command is empty" if self.lease_am else "the AM command is empty"
            )
        if self.lease_am is not None:
            if "\t" in self.command or "\n" in self.command or "\r" in self.command:
                raise SubmitError("--command cannot hold tabs or line breaks")
            self.lease_am.validate()
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


def local_resource(path: str | Path, kind: str = "FILE") -> tuple[str, LocalResource]:
    """(name in the container's directory, the resource) for a local file or archive: a
    ``file://`` URL with the size and modification time (ms) YARN checks when localizing."""
    p = Path(path).expanduser().absolute()
    try:
        st = p.stat()
    except OSError as exc:
        raise SubmitError(f"--{kind.lower()} {path}: {exc.strerror or exc}") from None
    if not p.is_file():
        raise SubmitError(f"--{kind.lower()} {path}: not a regular file")
    name = p.name
    if set(name) & (_UNSAFE_IN_ENV | set("$,=:")) or name.startswith("."):
        raise SubmitError(f"--{kind.lower()} {path}: the name {name!r} cannot be a resource name")
    return name, LocalResource(p.as_uri(), st.st_size, st.st_mtime_ns // 1_000_000, kind)


def local_resources(spec: SubmitSpec) -> dict[str, LocalResource]:
    """The resources ``spec`` ships (its files, archives and, under our AM, the AM jar)."""
    out: dict[str, LocalResource] = {}
    entries = [(f, "FILE") for f in spec.files] + [(a, "ARCHIVE") for a in spec.archives]
    if spec.lease_am is not None:
        entries.append((spec.lease_am.jar, "FILE"))
    for path, kind in entries:
        name, res = local_resource(path, kind)
        if name in out:
            raise SubmitError(f"two local resources are named {name!r}")
        out[name] = res
    if spec.lease_am is not None and AM_JAR_NAME in spec.files:
        raise SubmitError(f"--file cannot be named {AM_JAR_NAME} under the lease AM")
    return out


def containers_resources_env(resources: Mapping[str, LocalResource], skip: str) -> str:
    """``name=TYPE:size:timestamp:url,...``: what the Java AM gives every job container."""
    return ",".join(
        f"{name}={r.type}:{r.size}:{r.timestamp}:{r.resource}"
        for name, r in sorted(resources.items())
        if name != skip
    )


def application_classpath(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """``yarn.application.classpath`` from ``$HADOOP_CONF_DIR/yarn-site.xml`` (comma-separated
    entries), or Hadoop's default list when the variable, the file or the key is missing."""
    env = os.environ if environ is None else environ
    conf_dir = env.get("HADOOP_CONF_DIR")
    if conf_dir:
        site = Path(conf_dir) / "yarn-site.xml"
        try:
            root = ET.parse(site).getroot()
        except (OSError, ET.ParseError) as exc:
            log.warning("cannot read %s (%s): the default application classpath", site, exc)
            return DEFAULT_APPLICATION_CLASSPATH
        for prop in root.iter("property"):
            if (prop.findtext("name") or "").strip() == "yarn.application.classpath":
                entries = [e.strip() for e in (prop.findtext("value") or "").split(",")]
                if any(entries):
                    return tuple(e for e in entries if e)
    return DEFAULT_APPLICATION_CLASSPATH


def default_am_jar(environ: Mapping[str, str] | None = None) -> str:
    """``$YARN_ARBITER_AM_JAR``, else the jar ``mvn -f java/am/pom.xml package`` builds."""
    env = os.environ if environ is None else environ
    if env.get(ENV_AM_JAR):
        return env[ENV_AM_JAR]
    return str(Path(__file__).resolve().parent.parent / "java" / "am" / "target" / AM_JAR_NAME)


def build_submission(
    spec: SubmitSpec,
    *,
    yarn_app_id: str,
    arbiter_app_id: str,
    token: str,
    arbiter_address: str,
    tls_ca: str | None = None,
    resources: Mapping[str, LocalResource] | None = None,
) -> AppSubmission:
    """The ``POST /apps`` context for ``spec`` (pure: ``resources`` are the local resources
    :func:`local_resources` read off the disk)."""
    resources = dict(resources or {})
    env = dict(spec.env)
    command = spec.command
    if spec.lease_am is not None:
        command = spec.lease_am.am_command()
        env = {**spec.lease_am.environment(), **env}  # a user's CLASSPATH wins
        env[ENV_SIDECAR] = spec.lease_am.sidecar_command(spec.command, spec.max_gpus)
        shipped = containers_resources_env(resources, skip=AM_JAR_NAME)
        if shipped:
            env[ENV_LOCAL_RESOURCES] = shipped
    return AppSubmission(
        application_id=yarn_app_id,
        name=spec.name,
        command=command,
        queue=spec.queue,
        memory_mb=spec.memory_mb,
        vcores=spec.vcores,
        priority=spec.priority,
        application_type=spec.application_type,
        tags=application_tags(spec.tags, arbiter_app_id),
        environment=am_environment(
            env,
            arbiter_address=arbiter_address,
            arbiter_app_id=arbiter_app_id,
            token=token,
            tls_ca=tls_ca,
        ),
        local_resources=resources,
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
    submit_token: str | None = None,
) -> tuple[str, str]:
    """``RegisterApp`` on the arbiter; returns (app id, token). ``submit_token``: the
    arbiter's submitters' credential (needed unless it accepts anonymous registrations)."""
    jobs = []
    if spec.gang_size > 0:
        job = {"job_id": "main", "gang_size": spec.gang_size, "max_gpus": spec.max_gpus}
        jobs.append(job_to_pb(job))
    request = pb.RegisterAppRequest(
        app_name=spec.name,
        user=spec.user,
        queue=spec.queue,
        max_gpu_demand=spec.max_gpus,
        jobs=jobs,
        yarn_application_id=yarn_app_id,
    )
    # an active/standby pair (a:1,b:2): the standby, or a dead one, answers UNAVAILABLE
    addresses = arbiter_addresses(arbiter_address)
    for i, address in enumerate(addresses):
        channel = (
            grpc.secure_channel(address, credentials)
            if credentials is not None
            else grpc.insecure_channel(address)
        )
        try:
            metadata = [("x-submit-token", submit_token)] if submit_token else None
            reply = rpc.AppMasterStub(channel).RegisterApp(
                request, timeout=timeout, metadata=metadata
            )
            return reply.app_id, reply.app_token
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            if code == grpc.StatusCode.UNAVAILABLE and i + 1 < len(addresses):
                continue
            name = code.name if code is not None else "UNKNOWN"
            detail = exc.details() if hasattr(exc, "details") else str(exc)
            raise SubmitError(
                f"RegisterApp on the arbiter at {address} failed: {name}: {detail}"
            ) from None
        finally:
            channel.close()
    raise AssertionError("unreachable: arbiter_addresses returns at least one address")


def submit_ml_app(
    spec: SubmitSpec,
    rm: RMClient,
    *,
    arbiter_address: str,
    credentials: grpc.ChannelCredentials | None = None,
    am_arbiter_address: str | None = None,
    am_tls_ca: str | None = None,
    timeout: float = 10.0,
    submit_token: str | None = None,
) -> Submitted:
    """Submit ``spec`` (module docstring). ``arbiter_address`` is where this process reaches
    the arbiter; ``am_arbiter_address`` where the AM does (default the same); ``am_tls_ca`` the
    CA path as the AM container sees it (set when the arbiter serves TLS)."""
    spec.validate()
    resources = local_resources(spec)
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
        submit_token=submit_token,
    )
    log.info("registered %s with the arbiter as %s", new.application_id, app_id)
    submission = build_submission(
        spec,
        yarn_app_id=new.application_id,
        arbiter_app_id=app_id,
        token=token,
        arbiter_address=am_arbiter_address or arbiter_address,
        tls_ca=am_tls_ca,
        resources=resources,
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
