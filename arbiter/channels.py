"""Client channels to the arbiter: the Agent's (:mod:`arbiter.agent`) and the share
follower's (:class:`hive_hooks.share.ArbiterShare`), both long-lived streams to one address of
an active/standby pair (:mod:`arbiter.ha`).

* **A connection of its own per channel.** gRPC otherwise shares connections, and their
  reconnect backoff (up to 2 minutes), between a process's channels to one address, and an
  arbiter that just came back (a failover, a restart) would look refused for that long.
* **Keepalive pings on open streams.** A stream that carries nothing for a while (a query's
  share stream between two share changes) does not learn on its own that the arbiter behind
  it is gone without closing its connection: a frozen process (SIGSTOP, a long pause), a host
  that died, a network that drops everything. The client pings every
  :data:`CLIENT_KEEPALIVE_S`; an unanswered ping ends the stream UNAVAILABLE after as long
  again, and the client moves to the next address. The arbiter's server accepts pings every
  :data:`MIN_PING_INTERVAL_MS` and more seldom (its gRPC default, 5 minutes, would refuse
  these with GOAWAY "too_many_pings").
"""

from __future__ import annotations

import grpc

# How often a client pings an open stream's connection, and how long it waits for the answer.
CLIENT_KEEPALIVE_S = 10.0
# The shortest ping interval the arbiter's server accepts on a stream that sends it nothing.
MIN_PING_INTERVAL_MS = 5000


def channel_options(
    keepalive_s: float = CLIENT_KEEPALIVE_S, timeout_s: float | None = None
) -> list[tuple[str, int]]:
    """gRPC options of a client channel to the arbiter (module docstring): a ping every
    ``keepalive_s``, answered within ``timeout_s`` (``None``: as long again).

    >>> dict(channel_options(2.5))["grpc.keepalive_time_ms"]
    2500
    """
    ms = max(1, round(keepalive_s * 1000))
    wait_ms = ms if timeout_s is None else max(1, round(timeout_s * 1000))
    return [
        ("grpc.use_local_subchannel_pool", 1),
        ("grpc.keepalive_time_ms", ms),
        ("grpc.keepalive_timeout_ms", wait_ms),
        ("grpc.http2.ping_timeout_ms", wait_ms),  # what this gRPC waits for a ping's answer
        # pings go on while the client sends nothing (its default stops after 2 of them)
        ("grpc.http2.max_pings_without_data", 0),
    ]


def arbiter_channel(
    target: str,
    credentials: grpc.ChannelCredentials | None = None,
    keepalive_s: float = CLIENT_KEEPALIVE_S,
    timeout_s: float | None = None,
) -> grpc.Channel:
    """A channel to the arbiter at ``target`` (``host:port``), TLS when ``credentials``;
    ``keepalive_s`` and ``timeout_s`` as for :func:`channel_options`."""
    options = channel_options(keepalive_s, timeout_s)
    if credentials is not None:
        return grpc.secure_channel(target, credentials, options=options)
    return grpc.insecure_channel(target, options=options)
