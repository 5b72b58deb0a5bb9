"""The answers the emulated RM sends: status, body, Content-Type, headers.

Errors are answered as the RM's Jersey layer answers them: a JSON ``RemoteException``
(``exception``, ``message``, ``javaClassName``) for the REST API's 4xx, or plain text where the
RM answers plain text (``/scheduler-conf``), which Hadoop 3.5 labels ``application/json``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from yarn_bridge.emulator.shapes import _JAVA_EXCEPTIONS
from yarn_bridge.emulator.state import _HTTPError


@dataclass
class _Reply:
    status: int
    body: bytes = b""
    content_type: str | None = "application/json"  # None: no Content-Type (an empty 202)
    headers: dict[str, str] = field(default_factory=dict)
    disconnect_after: int | None = None  # send only this many body bytes, then close


def _json_reply(status: int, doc: Any, headers: dict[str, str] | None = None) -> _Reply:
    return _Reply(status, json.dumps(doc).encode(), "application/json", headers or {})


def _error_reply(err: _HTTPError, text_type: str = "text/plain") -> _Reply:
    if err.text:
        return _Reply(err.status, err.message.encode(), text_type)
    return _json_reply(err.status, {"RemoteException": {
        "exception": err.exception,
        "message": err.message,
        "javaClassName": _JAVA_EXCEPTIONS.get(err.exception, err.exception),
    }})  # fmt: skip


def text_type(jersey2: bool) -> str:
    """Content-Type of the RM's plain-text answers (scheduler-conf): 3.5 (``jersey2``) labels
    them ``application/json`` although the body is not JSON."""
    return "application/json" if jersey2 else "text/plain"
