"""The request bodies the client sends to the ResourceManager REST API, as typed builders
with ``to_json``: :class:`AppSubmission` (``POST /ws/v1/cluster/apps``, an
``ApplicationSubmissionContext`` with its :class:`LocalResource` entries, spec §1.5) and
:class:`SchedConfUpdate` (``PUT /ws/v1/cluster/scheduler-conf``, a ``SchedConfUpdateInfo`` in
the JAXB mapping, spec §1.6). Pure, no I/O.

* **Scheduler-conf** bodies follow the JAXB mapping of ``SchedConfUpdateInfo``
  (``{"update-queue":[{"queue-name":..,"params":{"entry":[{"key":..,"value":..}]}}], ...}``,
  §1.6 [check] on the compose cluster).
* **Tags** are lower-cased by YARN (§1.4): :class:`AppSubmission` lower-cases them so what is
  read back equals what was sent.
* The REST API gives the AM memory and vcores only: GPUs are requested later by the AM itself
  (§1.5, §1.8).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["AppSubmission", "LocalResource", "SchedConfUpdate"]


@dataclass(frozen=True, slots=True)
class LocalResource:
    """One entry of ``am-container-spec.local-resources`` (size and timestamp must match the
    HDFS file, from WebHDFS ``GETFILESTATUS``)."""

    resource: str
    size: int
    timestamp: int
    type: str = "FILE"  # FILE | ARCHIVE | PATTERN
    visibility: str = "APPLICATION"  # PUBLIC | PRIVATE | APPLICATION

    def to_json(self) -> dict[str, Any]:
        return {
            "resource": self.resource,
            "type": self.type,
            "visibility": self.visibility,
            "size": self.size,
            "timestamp": self.timestamp,
        }


@dataclass(frozen=True, slots=True)
class AppSubmission:
    """An ``ApplicationSubmissionContext`` for ``POST /apps`` (spec §1.5). The REST API gives
    the AM memory and vcores only: GPUs are requested later by the AM itself (§1.5, §1.8)."""

    application_id: str
    name: str
    command: str
    queue: str = "default"
    memory_mb: int = 1024
    vcores: int = 1
    priority: int = 0
    application_type: str = "YARN"
    tags: tuple[str, ...] = ()
    environment: Mapping[str, str] = field(default_factory=dict)
    local_resources: Mapping[str, LocalResource] = field(default_factory=dict)
    max_app_attempts: int = 1
    unmanaged_am: bool = False
    keep_containers: bool = False
    app_node_label_expression: str | None = None
    am_node_label_expression: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON body (``ApplicationSubmissionContextInfo`` field names)."""
        spec: dict[str, Any] = {"commands": {"command": self.command}}
        if self.local_resources:
            spec["local-resources"] = {
                "entry": [{"key": k, "value": v.to_json()} for k, v in self.local_resources.items()]
            }
        if self.environment:
            spec["environment"] = {
                "entry": [{"key": k, "value": v} for k, v in self.environment.items()]
            }
        body: dict[str, Any] = {
            "application-id": self.application_id,
            "application-name": self.name,
            "queue": self.queue,
            "priority": self.priority,
            "am-container-spec": spec,
            "unmanaged-AM": self.unmanaged_am,
            "max-app-attempts": self.max_app_attempts,
            "resource": {"memory": self.memory_mb, "vCores": self.vcores},
            "application-type": self.application_type,
            "keep-containers-across-application-attempts": self.keep_containers,
        }
        if self.tags:
            body["application-tags"] = {"tag": [t.lower() for t in self.tags]}
        if self.app_node_label_expression is not None:
            body["app-node-label-expression"] = self.app_node_label_expression
        if self.am_node_label_expression is not None:
            body["am-container-node-label-expression"] = self.am_node_label_expression
        return body


def _entries(params: Mapping[str, Any]) -> dict[str, Any]:
    return {"entry": [{"key": k, "value": str(v)} for k, v in params.items()]}


@dataclass(frozen=True, slots=True)
class SchedConfUpdate:
    """A ``PUT /scheduler-conf`` mutation (``SchedConfUpdateInfo``, spec §1.6). Queue params
    use short keys (``capacity``, ``maximum-capacity``, ``state``); ``global_updates`` full keys.

    >>> SchedConfUpdate(update_queue={"root.ml": {"capacity": 60}}).to_json()
    {'update-queue': [{'queue-name': 'root.ml', 'params': {'entry': [{'key': 'capacity', \
'value': '60'}]}}]}
    """

    update_queue: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    add_queue: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    remove_queue: tuple[str, ...] = ()
    global_updates: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {}
        if self.add_queue:
            body["add-queue"] = [
                {"queue-name": q, "params": _entries(p)} for q, p in self.add_queue.items()
            ]
        if self.remove_queue:
            body["remove-queue"] = list(self.remove_queue)
        if self.update_queue:
            body["update-queue"] = [
                {"queue-name": q, "params": _entries(p)} for q, p in self.update_queue.items()
            ]
        if self.global_updates:
            body["global-updates"] = _entries(self.global_updates)
        return body
