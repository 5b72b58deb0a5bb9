"""The YARN bridge's configuration keys: :data:`BRIDGE_SCHEMA` (``yarn.arbiter.bridge.*``), a
:class:`arbiter.config.Schema` a program loads beside the arbiter's own
(``load_config(path, schemas=(SCHEMA, BRIDGE_SCHEMA))``), so a bad value fails at start with the
key and its source named, like any ``arbiter.*`` key.

Where a value comes from, later ones winning: the defaults below (those of ``yarn-arbiter
serve``'s flags), the configuration file (``--config``), the ``YARN_ARBITER_BRIDGE_*`` variable
named after the key, the older ``YARN_ARBITER_RM_URL`` (for the RM's URL), then the flags
(:func:`yarn_bridge.bridge_cli.bridge_settings`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from arbiter.config import ConfigError, Property, Schema, parse_bool
from yarn_bridge.enforcer import DEFAULT_SLACK_S
from yarn_bridge.env import ENV_RM_URL
from yarn_bridge.rm_events import DEFAULT_ANALYTICS_QUEUES, DEFAULT_CONFIRM_POLLS

__all__ = [
    "ANALYTICS_QUEUES",
    "AUTH_CACHE_S",
    "AUTH_COMMAND",
    "AUTH_HOOK",
    "BRIDGE_SCHEMA",
    "ENFORCE",
    "ENFORCE_SLACK_S",
    "GPU_QUEUE",
    "KRB5_CONF",
    "KRB_KEYTAB",
    "KRB_PRINCIPAL",
    "RM_CONFIRM_POLLS",
    "RM_POLL_S",
    "RM_URL",
    "RM_USER",
    "RM_WAIT_S",
    "split_names",
]

PREFIX: Final = "yarn.arbiter.bridge."
RM_URL: Final = PREFIX + "rm.url"
RM_USER: Final = PREFIX + "rm.user"
RM_WAIT_S: Final = PREFIX + "rm.wait.seconds"
RM_POLL_S: Final = PREFIX + "rm.poll.seconds"
RM_CONFIRM_POLLS: Final = PREFIX + "rm.confirm-polls"
AUTH_COMMAND: Final = PREFIX + "rm.auth.header-command"
AUTH_CACHE_S: Final = PREFIX + "rm.auth.cache.seconds"
AUTH_HOOK: Final = PREFIX + "rm.auth.hook"
KRB_PRINCIPAL: Final = PREFIX + "rm.auth.kerberos.principal"
KRB_KEYTAB: Final = PREFIX + "rm.auth.kerberos.keytab"
KRB5_CONF: Final = PREFIX + "rm.auth.kerberos.krb5-conf"
ENFORCE: Final = PREFIX + "enforce.enabled"
ENFORCE_SLACK_S: Final = PREFIX + "enforce.slack.seconds"
GPU_QUEUE: Final = PREFIX + "queue.gpu"
ANALYTICS_QUEUES: Final = PREFIX + "queue.analytics"


def split_names(text: str) -> tuple[str, ...]:
    """``"a, b,,c"`` -> ``("a", "b", "c")``: URLs or queue names separated by commas."""
    return tuple(name.strip() for name in text.split(",") if name.strip())


def _one_auth(values: Mapping[str, Any]) -> None:
    kerberos = values[KRB_PRINCIPAL] or values[KRB_KEYTAB]
    pairs = ((AUTH_COMMAND, values[AUTH_COMMAND]), (AUTH_HOOK, values[AUTH_HOOK]),
             (KRB_KEYTAB, kerberos))  # fmt: skip
    given = [key for key, v in pairs if v]
    if len(given) > 1:
        how = "not both" if len(given) == 2 else "not all"
        raise ConfigError(
            f"{' and '.join(given)} are set: give one of --rm-auth-header-command, "
            f"--rm-auth-hook or --principal/--keytab, {how}"
        )
    # A principal without a keytab (or the reverse) fails when the hook is built
    # (yarn_bridge.kerberos.kerberos_hook): flags are applied one by one, each checked.


BRIDGE_SCHEMA: Final = Schema(
    PREFIX,
    (
        Property(
            RM_URL,
            "",
            str,
            lambda v: True,
            "ResourceManager web URLs separated by commas",
            "the ResourceManager(s) (several: RM HA); empty: the arbiter runs standalone on "
            "--cluster (serve --rm-url)",
            legacy_env=(ENV_RM_URL,),
        ),
        Property(
            RM_USER,
            "",
            str,
            lambda v: True,
            "a user name",
            "simple-auth user for RM REST calls, user.name (serve --rm-user)",
        ),
        Property(
            RM_WAIT_S,
            60.0,
            float,
            lambda v: v >= 0,
            "a number >= 0",
            "how long serve waits for the RM at start before giving up (--rm-wait-seconds)",
        ),
        Property(
            RM_POLL_S,
            5.0,
            float,
            lambda v: v > 0,
            "a number > 0",
            "RM poll interval (--rm-poll-seconds)",
        ),
        Property(
            RM_CONFIRM_POLLS,
            DEFAULT_CONFIRM_POLLS,
            int,
            lambda v: v >= 1,
            "an integer >= 1",
            "polls an app or node must be missing before it counts as gone (--rm-confirm-polls)",
        ),
        Property(
            AUTH_COMMAND,
            "",
            str,
            lambda v: True,
            "a shell command",
            "SPNEGO for RM REST calls: a command printing the headers of each request "
            "(--rm-auth-header-command)",
        ),
        Property(
            AUTH_CACHE_S,
            0.0,
            float,
            lambda v: v >= 0,
            "a number >= 0",
            "reuse the auth command's headers per RM host this long (--rm-auth-cache-seconds)",
        ),
        Property(
            AUTH_HOOK,
            "",
            str,
            lambda v: not v or ":" in v,
            "MODULE:FUNCTION",
            "SPNEGO for RM REST calls: a Python function (method, url) -> headers (--rm-auth-hook)",
        ),
        Property(
            KRB_PRINCIPAL,
            "",
            str,
            lambda v: True,
            "a Kerberos principal, e.g. alice@EXAMPLE.COM",
            "Kerberos for RM REST calls: log in as this principal from the keytab and use SPNEGO "
            "(--principal)",
        ),
        Property(
            KRB_KEYTAB,
            "",
            str,
            lambda v: True,
            "a keytab file",
            "Kerberos for RM REST calls: the principal's keytab (--keytab)",
        ),
        Property(
            KRB5_CONF,
            "",
            str,
            lambda v: True,
            "a krb5.conf file",
            "Kerberos: the realm's krb5.conf; empty: $KRB5_CONFIG, else /etc/krb5.conf "
            "(--krb5-conf)",
        ),
        Property(
            ENFORCE,
            True,
            parse_bool,
            lambda v: isinstance(v, bool),
            "true or false",
            "kill apps holding GPUs past their leases; false: watch only (serve --no-enforce)",
        ),
        Property(
            ENFORCE_SLACK_S,
            DEFAULT_SLACK_S,
            float,
            lambda v: v >= 0,
            "a number >= 0",
            "time after a lease ends before an app still holding its GPUs is killed "
            "(--enforce-slack-seconds)",
        ),
        Property(
            GPU_QUEUE,
            "",
            str,
            lambda v: True,
            "a queue path, e.g. root.gpu",
            "keep this Capacity Scheduler queue's yarn.io/gpu equal to the GPUs under lease; "
            "empty: leave queues alone (--gpu-queue)",
        ),
        Property(
            ANALYTICS_QUEUES,
            ",".join(DEFAULT_ANALYTICS_QUEUES),
            str,
            lambda v: bool(split_names(v)),
            "queue names separated by commas",
            "queues whose capacity is the analytics share's R (--analytics-queue)",
        ),
    ),
    check=_one_auth,
)
