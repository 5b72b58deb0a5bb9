"""The REST API of the emulated RM: ``/ws/v1/cluster/*`` requests to the cluster's answers.

Imitates the ResourceManager's ``RMWebServices`` routing: ``GET /`` and ``/info``,
``/metrics``, ``/scheduler``, ``/nodes``, ``/nodes/{id}``, ``/apps`` (``GET`` with filters,
``POST`` a submission: ``202`` with ``Location`` and no entity), ``POST /apps/new-application``,
``GET`` / ``PUT /scheduler-conf`` (``PUT`` for admins only when the RM has ``admins``),
``/apps/{id}`` and its ``state``, ``queue``, ``priority``, ``timeouts[/LIFETIME]`` and
``timeout``; ``405`` for a known path with another method, ``404`` for an unknown one. The
request's user is ``user.name`` or, for ``Authorization: Negotiate <token>``, a SPNEGO user
(``spnego``); any other ``Authorization`` authenticates no one, as Hadoop's Kerberos handler.
With ``require_auth`` a write without a user is refused (403 ``AuthorizationException``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from yarn_bridge.emulator.replies import _json_reply, _Reply, text_type
from yarn_bridge.emulator.shapes import WS
from yarn_bridge.emulator.state import _bad, _HTTPError, _not_found, _parse_iso

if TYPE_CHECKING:
    from yarn_bridge.emulator.cluster import SimCluster
    from yarn_bridge.emulator.server import RMEmulator

_APP_PATH = re.compile(r"^/apps/([^/]+)(?:/(state|queue|priority|timeouts|timeout)(?:/([^/]+))?)?$")


def _user(query: Mapping[str, str], headers: Mapping[str, str]) -> str | None:
    """The request's user: ``user.name``, or ``spnego`` for a SPNEGO-authenticated one."""
    # SPNEGO (KerberosAuthenticationHandler) accepts only "Authorization: Negotiate <token>"
    negotiate = headers.get("authorization", "").startswith("Negotiate ")
    return query.get("user.name") or ("spnego" if negotiate else None)


def route(rm: RMEmulator, method: str, path: str, query: Mapping[str, str],
          headers: Mapping[str, str], body: bytes) -> _Reply:  # fmt: skip
    """The answer of ``rm`` (ACTIVE) to a request for ``path`` under ``/ws/v1/cluster``;
    raises :class:`_HTTPError` for the RM's error answers."""
    if not path.startswith(WS):
        raise _not_found(f"no such resource: {path}")
    sub = path[len(WS) :] or "/"
    user = _user(query, headers)
    if method != "GET" and rm.require_auth and user is None:
        raise _HTTPError(
            403, "AuthorizationException", "Unable to obtain user name, user not authenticated"
        )
    doc: Any = None
    if method in ("PUT", "POST") and body:
        try:
            doc = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise _bad(f"Unable to parse the JSON body: {exc}") from None
    rm_address = f"{rm.host}:{rm.port}"
    c = rm.cluster
    with c.lock:
        c.tick()
        if sub in ("/", "/info") and method == "GET":
            return _json_reply(200, c.cluster_info_json(rm.ha_state, rm.ha_enabled, rm.started_on))
        if sub == "/metrics" and method == "GET":
            return _json_reply(200, c.metrics_json())
        if sub == "/scheduler" and method == "GET":
            return _json_reply(200, c.scheduler_json())
        if sub == "/nodes" and method == "GET":
            return _json_reply(200, c.nodes_json(query.get("states")))
        if sub.startswith("/nodes/") and method == "GET":
            return _json_reply(200, c.node_json(sub[len("/nodes/") :]))
        if sub == "/apps" and method == "GET":
            return _json_reply(200, c.apps_json(query, rm_address))
        if sub == "/apps" and method == "POST":
            app_id = c.submit_json(doc, user)
            return _Reply(  # no entity, so no Content-Type (as the RM)
                202, b"", None, {"Location": f"http://{rm_address}{WS}/apps/{app_id}"}
            )
        if sub == "/apps/new-application" and method == "POST":
            return _json_reply(200, c.new_application_json())
        if sub == "/scheduler-conf" and method == "GET":
            return _json_reply(200, c.scheduler_conf_json())
        if sub == "/scheduler-conf" and method == "PUT":
            if rm.admins is not None and user not in rm.admins:
                raise _HTTPError(403, "ForbiddenException",
                                 f"User {user} is not admin; cannot mutate the scheduler "
                                 "configuration", text=True)  # fmt: skip
            c.mutate_conf(doc, user)
            return _Reply(200, b"Configuration change successfully applied.",
                          text_type(c.jersey2))  # fmt: skip
        m = _APP_PATH.match(sub)
        if m:
            return _app_route(c, method, m.group(1), m.group(2), m.group(3), doc,
                              rm_address)  # fmt: skip
    if sub in ("/", "/info", "/metrics", "/scheduler", "/nodes", "/apps", "/scheduler-conf",
               "/apps/new-application"):  # fmt: skip
        raise _HTTPError(405, "WebApplicationException", f"{method} not allowed on {path}")
    raise _not_found(f"no such resource: {path}")


def _app_route(c: SimCluster, method: str, app_id: str, what: str | None, extra: str | None,
               doc: Any, rm_address: str) -> _Reply:  # fmt: skip
    """``/apps/{id}`` and its ``state``, ``queue``, ``priority``, ``timeouts`` and ``timeout``."""
    app = c.state.find_app(app_id)

    def field_of(key: str) -> Any:
        if not isinstance(doc, dict) or key not in doc:
            raise _bad(f"The request body needs a {key!r} field")
        return doc[key]

    if what is None and method == "GET" and extra is None:
        return _json_reply(200, {"app": c.app_json(app, rm_address)})
    if what == "state" and extra is None:
        if method == "GET":
            return _json_reply(200, {"state": app.state})
        if method == "PUT":
            target = str(field_of("state")).upper()
            if target != "KILLED":
                raise _bad("Only 'KILLED' is allowed as a target state.")
            status, state = c.kill(app_id, (doc or {}).get("diagnostics"))
            headers = {"Location": f"http://{rm_address}{WS}/apps/{app_id}/state"} if (
                status == 202) else {}  # fmt: skip
            return _json_reply(status, {"state": state}, headers)
    if what == "queue" and extra is None:
        if method == "GET":
            return _json_reply(200, {"queue": c.state.queue_display(app.queue)})
        if method == "PUT":
            return _json_reply(200, {"queue": c.move(app_id, str(field_of("queue")))})
    if what == "priority" and extra is None:
        if method == "GET":
            return _json_reply(200, {"priority": app.priority})
        if method == "PUT":
            try:
                prio = int(field_of("priority"))
            except (TypeError, ValueError):
                raise _bad("priority must be an integer") from None
            return _json_reply(200, {"priority": c.set_priority(app_id, prio)})
    if what == "timeouts" and method == "GET":
        if extra is None:
            return _json_reply(200, {"timeouts": {"timeout": [c.views.timeout_json(app)]}})
        if extra.upper() != "LIFETIME":
            raise _bad(f"Invalid timeout type {extra}: only LIFETIME is supported")
        return _json_reply(200, {"timeout": c.views.timeout_json(app)})
    if what == "timeout" and extra is None and method == "PUT":
        t = field_of("timeout")
        if not isinstance(t, dict) or str(t.get("type", "")).upper() != "LIFETIME":
            raise _bad("Timeout type must be LIFETIME")
        if not t.get("expiryTime"):
            raise _bad("Timeout expiryTime must be given")
        c.set_lifetime(app_id, _parse_iso(str(t["expiryTime"])))
        return _json_reply(200, {"timeout": c.views.timeout_json(app)})
    raise _HTTPError(
        405, "WebApplicationException", f"{method} not allowed on /apps/{app_id}/{what or ''}"
    )
