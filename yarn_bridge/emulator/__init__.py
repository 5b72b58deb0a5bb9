"""A YARN ResourceManager emulator: the RM REST API over a simulated GPU cluster, for tests.

No Hadoop distribution is installable here (``ARCHITECTURE.md`` principle 5), so this package
serves ``/ws/v1/cluster/*`` with the JSON of Hadoop 3.3 / 3.4 (``ResourceManagerRest.md`` and
the ``webapp/dao`` classes; spec ``../shared/spec/yarn-hive-integration.md`` §1.1-1.6, §1.8)
and 3.5 (as a real 3.5.0 RM answered: ``tests/golden/rm-3.5.0``).
The compose cluster runs the real RM; the documented key sets
(:mod:`~yarn_bridge.emulator.shapes`) are what the tests hold the emulator to
(``tests/integration/test_yarn_emulator.py``).

Pieces:

* :class:`SimCluster`: the state (nodes with ``yarn.io/gpu``, memory, vcores; applications;
  Capacity Scheduler configuration or Fair Scheduler weights) and the JSON views, a facade over
  the parts listed under "Modules". Time is a :class:`Clock` the tests can drive
  (``manual=True``: time moves only by ``advance``); state is brought up to date lazily, event
  by event, whenever it is read.
* :class:`RMEmulator`: a ``ThreadingHTTPServer`` shell around one cluster, with faults on
  demand (outage as connection refused or 503, slow responses, injected malformed/partial
  answers, restart with or without recovered apps). ``RMEmulator(...).start()`` returns its URL.
  The same faults are on HTTP at :data:`FAULTS_PATH` (``/emulator/faults``: ``GET`` shows the
  faults in force, ``POST`` a JSON object changes them; keys in ``yarn_bridge.cli.FAULTS_HELP``)
  so that ``yarn-arbiter emulate-rm`` can be driven from outside the process.
* :class:`RMHAPair`: two emulators over one cluster (the shared state store), one ACTIVE, one
  STANDBY, ``failover()`` on demand.

Application life cycle (per app): submitted -> ``NEW`` for ``new_seconds`` -> ``ACCEPTED`` ->
``RUNNING`` once ``start_seconds`` have passed *and* its AM container (memory, vcores) plus one
container per requested GPU fit on RUNNING nodes (first fit, all or nothing, priority then
submission order; under the Capacity Scheduler also within the queue's maximum capacity) ->
``FINISHED`` / ``SUCCEEDED`` after its duration (``app_seconds``, optionally jittered by a
seeded RNG). Kill -> ``KILLED``; LIFETIME timeout expiry -> ``KILLED`` with Hadoop's
diagnostics; submission to an unknown or STOPPED Capacity queue -> ``FAILED``. A lost node
takes its containers with it: an app whose AM was there starts a new attempt (``ACCEPTED``)
or ``FAILED`` when ``max-app-attempts`` is spent; lost GPU containers are placed again.

Decisions (emulator only, not Hadoop's):

* The REST submission API cannot give an AM a GPU (spec §1.5); a real AM asks for GPU
  containers over AMRM. The emulator stands in for that AM: an ``environment`` entry
  :data:`EMULATOR_GPUS_ENV` in ``am-container-spec`` makes it hold that many 1-GPU containers
  while RUNNING, and :data:`EMULATOR_SECONDS_ENV` sets its duration.
* Capacity Scheduler queues (the default is ``root.{default,hive,ml}`` at 20/40/40, the
  spec §5.3 layout; the compose cluster's ``default,analytics,gpu`` absolute vectors are one
  ``queues=`` away) are percentages or **absolute resource vectors**
  (``[memory=8192,vcores=8,yarn.io/gpu=2]``, memory in MB or with Mi/Gi/Ti, spec §1.6).
  ``PUT /scheduler-conf`` is validated as Hadoop does in legacy mode: percentage siblings sum
  to 100 and ``capacity <= maximum-capacity``; siblings (and a non-root parent and its
  children) share one mode, so a switch to vectors updates them all in one mutation; a vector's
  minimum is at most its maximum vector; a removed queue must be STOPPED and empty. Every
  accepted mutation is recorded (:attr:`SimCluster.conf_log`). Effective resources
  (``effectiveMinResource`` / ``effectiveMaxResource``, and what the scheduler enforces): a
  percentage of the parent's; a vector as configured, a resource missing from a minimum vector
  is 0 and from a maximum vector the parent's maximum, and when siblings' minimums add up to
  more than the parent's (nodes lost) they are scaled down in proportion, as the RM does. In
  absolute mode ``capacity`` / ``absoluteCapacity`` are dominant shares (DominantResourceCalculator
  ``ratio``) of the parent's / cluster's resources.
  The Fair Scheduler is flat (leaves under ``root`` with weights); fair share =
  cluster x weight / sum of the weights of *active* leaves (those with live apps), steady fair
  share the same over all leaves. The scheduler-conf API answers 400 there, as in Hadoop
  (only a ``MutableConfScheduler`` supports it).
* Shapes are the 3.4 ``ResourceManagerRest.md`` examples where they exist and the DAO fields
  otherwise; keys Hadoop omits when null are omitted here too (``trackingUrl`` before RUNNING,
  ``usedResource``/``availableResource`` of inactive nodes, ``resourceInfo`` outside the
  Capacity Scheduler or after the app ends). ``resourceSecondsMap`` is JAXB's
  ``{"entry":[{"key":..,"value":".."}]}`` [check on the compose cluster]. Empty lists answer
  ``{"apps":null}`` / ``{"nodes":null}`` (the known Hadoop quirk). ``GET /scheduler-conf`` is
  ``{"property":[{"name","value"}]}`` (``ConfInfo`` without its root element) [check].
* A standby RM answers ``/ws/v1/cluster/info`` itself (``haState: STANDBY``) and every other
  REST path with ``307`` + ``Location`` to the active RM (``standby_mode="redirect"``, Hadoop
  2.8+) or with the older ``200`` "This is standby RM. Redirecting to the current active RM"
  page and a ``Refresh`` header (``standby_mode="refresh"``).
* Application tags are lower-cased (YARN does); the app's ``queue`` is the leaf name under the
  Capacity Scheduler and the full path under the Fair Scheduler, as Hadoop 3.3 reports them.
* **Hadoop line** (``hadoop_version="3.4"``, the default, or ``"3.3"``; ``emulate-rm
  --hadoop-version``): 3.4 serves the merged 3.4.1 shapes above; 3.3 serves 3.3.6 (the
  version the compose cluster's ``apache/hadoop:3.3.6`` reports) and omits
  :data:`CS_34_ONLY_KEYS` from every Capacity Scheduler queue info and partition
  (``queueCapacityVectorInfo``, ``weight``/``normalizedWeight``, ``mode``, ``queueType``,
  ``creationMethod``, ``autoCreationEligibility``, the ``autoQueue*TemplateProperties``: 3.4's
  weight mode, flexible auto queue creation and capacity vectors; spec §1.3 lists them in the
  3.4-era example and says to parse by key presence). Everything else is served alike
  [check against the compose cluster's RM]. ``"3.5"`` serves 3.5.0 as a real RM answered
  (golden files ``tests/golden/rm-3.5.0``, held to by
  ``tests/integration/test_emulator_golden.py``):
  its REST layer is Jersey 2 (:attr:`SimCluster.jersey2`), so empty list wrappers are ``{}``
  (``{"apps":{}}``, not ``null``), empty maps and lists are omitted (``attributes`` of a
  ``resourceInformation``, ``resourceRequests``, ``preemptedResourceSecondsMap``),
  ``resourceSecondsMap`` values are numbers, plain-text answers (scheduler-conf) are labelled
  ``application/json``, a NotFoundException's message has no ``java.lang.Exception:`` prefix
  and an app's ``queue`` is the full path (``root.gpu``); ``/metrics`` adds
  :data:`CLUSTER_METRICS_35_KEYS`, nodes :data:`NODE_35_KEYS`. On every line (the capture
  showed the old emulator wrong, and nothing is version-specific about it): a leaf's
  ``users.user[]`` is the whole ``UserInfo`` (:data:`CS_USER_KEYS`), ``deSelects=
  appNodeLabelExpression`` has no effect (Hadoop's ``AppInfo`` sets the field before testing
  it), ``/metrics`` has ``utilizedMBPercent`` / ``utilizedVirtualCoresPercent`` /
  ``rmSchedulerBusyPercent`` and the ``202`` of ``POST /apps`` has no Content-Type.
* ``am_registers=False`` models an AM that never registers (the golden capture's ``sleep``
  AM): its container is allocated and runs, the app stays ``ACCEPTED`` with the RM's
  "waiting for AM container to Register" diagnostics and asks for no GPU containers, until it
  is killed or its lifetime ends.
* **Fault control** over HTTP (:data:`FAULTS_PATH`, outside ``/ws/v1`` so it can never be
  mistaken for a Hadoop endpoint; ``control=False`` turns it off): never delayed, never in a
  503/drop outage, not in :attr:`RMEmulator.requests`. A ``"refused"`` outage closes its port
  too, so it needs ``outage_seconds``; outages and restarts asked for over HTTP start on a
  timer, after the answer is sent. A body is checked whole before anything changes (400 and no
  change on any error).
* ``Authorization: Negotiate <token>`` stands for a SPNEGO-authenticated user (``spnego``); any
  other ``Authorization`` value authenticates no one, as Hadoop's Kerberos handler.

Modules (everything public is re-exported here):

* :mod:`~yarn_bridge.emulator.shapes`: the documented key sets and shared constants;
* :mod:`~yarn_bridge.emulator.state`: :class:`Clock`, the node / container / app records and
  the state every part of a :class:`SimCluster` shares;
* :mod:`~yarn_bridge.emulator.engine`: the event loop and container placement;
* :mod:`~yarn_bridge.emulator.operations`: NodeManagers, submissions, app updates, RM restart;
* :mod:`~yarn_bridge.emulator.capacity` / :mod:`~yarn_bridge.emulator.fair`: the two
  schedulers (configuration, ``scheduler-conf``, their ``/scheduler`` views);
* :mod:`~yarn_bridge.emulator.views`: the other ``GET`` answers, per Hadoop line;
* :mod:`~yarn_bridge.emulator.cluster`: :class:`SimCluster`, the facade over those parts;
* :mod:`~yarn_bridge.emulator.replies`, :mod:`~yarn_bridge.emulator.routes`,
  :mod:`~yarn_bridge.emulator.faults`, :mod:`~yarn_bridge.emulator.server`: the HTTP side
  (answers, REST routing, fault injection, :class:`RMEmulator` and :class:`RMHAPair`).
"""

from yarn_bridge.emulator.cluster import SimCluster
from yarn_bridge.emulator.faults import FAULTS_PATH
from yarn_bridge.emulator.server import RequestRecord, RMEmulator, RMHAPair
from yarn_bridge.emulator.shapes import (
    AM_WAITING_DIAGNOSTICS,
    APP_35_EMPTY_ABSENT_KEYS,
    APP_KEYS,
    APP_OPTIONAL_KEYS,
    APP_PARTITION_KEYS,
    APP_TIMEOUT_KEYS,
    CLUSTER_INFO_KEYS,
    CLUSTER_METRICS_35_KEYS,
    CLUSTER_METRICS_KEYS,
    CS_34_ONLY_KEYS,
    CS_LEAF_QUEUE_KEYS,
    CS_PARENT_QUEUE_KEYS,
    CS_PREFIX,
    CS_ROOT_KEYS,
    CS_USER_KEYS,
    EMULATOR_GPUS_ENV,
    EMULATOR_SECONDS_ENV,
    FINAL,
    FS_LEAF_QUEUE_KEYS,
    FS_PARENT_QUEUE_KEYS,
    FS_SCHEDULER_INFO_KEYS,
    GPU,
    HADOOP_VERSION,
    HADOOP_VERSIONS,
    INT_MAX,
    LIFETIME_DIAGNOSTICS,
    LIVE,
    LONG_MAX,
    NEW_APPLICATION_KEYS,
    NODE_35_KEYS,
    NODE_INACTIVE_ABSENT_KEYS,
    NODE_KEYS,
    NODE_OPTIONAL_KEYS,
    RESOURCE_INFORMATION_35_KEYS,
    RESOURCE_INFORMATION_KEYS,
    RESOURCE_KEYS,
    SUBMISSION_CONTEXT_KEYS,
    WS,
)
from yarn_bridge.emulator.state import Clock

__all__ = [
    "AM_WAITING_DIAGNOSTICS",
    "APP_35_EMPTY_ABSENT_KEYS",
    "APP_KEYS",
    "APP_OPTIONAL_KEYS",
    "APP_PARTITION_KEYS",
    "APP_TIMEOUT_KEYS",
    "CLUSTER_INFO_KEYS",
    "CLUSTER_METRICS_35_KEYS",
    "CLUSTER_METRICS_KEYS",
    "CS_34_ONLY_KEYS",
    "CS_LEAF_QUEUE_KEYS",
    "CS_PARENT_QUEUE_KEYS",
    "CS_PREFIX",
    "CS_ROOT_KEYS",
    "CS_USER_KEYS",
    "EMULATOR_GPUS_ENV",
    "EMULATOR_SECONDS_ENV",
    "FAULTS_PATH",
    "FINAL",
    "FS_LEAF_QUEUE_KEYS",
    "FS_PARENT_QUEUE_KEYS",
    "FS_SCHEDULER_INFO_KEYS",
    "GPU",
    "HADOOP_VERSION",
    "HADOOP_VERSIONS",
    "INT_MAX",
    "LIFETIME_DIAGNOSTICS",
    "LIVE",
    "LONG_MAX",
    "NEW_APPLICATION_KEYS",
    "NODE_35_KEYS",
    "NODE_INACTIVE_ABSENT_KEYS",
    "NODE_KEYS",
    "NODE_OPTIONAL_KEYS",
    "RESOURCE_INFORMATION_35_KEYS",
    "RESOURCE_INFORMATION_KEYS",
    "RESOURCE_KEYS",
    "SUBMISSION_CONTEXT_KEYS",
    "WS",
    "Clock",
    "RMEmulator",
    "RMHAPair",
    "RequestRecord",
    "SimCluster",
]
