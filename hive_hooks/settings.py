"""The replanner's configuration keys: :data:`REPLANNER_SCHEMA` (``qoop.hive.*``), a
:class:`arbiter.config.Schema` like the arbiter's and the YARN bridge's, and
:func:`replanner_config`, the values ``qoop-hive`` runs with.

Where a value comes from, later ones winning: the defaults below, the file named by
``$QOOP_HIVE_CONF`` (a ``qoop-hive-site.xml`` or ``key = value`` lines; none if unset), the
variable named after the key (``qoop.hive.registry.path`` -> ``QOOP_HIVE_REGISTRY_PATH``), the
older ``QOOP_HIVE_REGISTRY``, then ``qoop-hive``'s flags (``--registry``, ``engine --workdir``).
``yarn-arbiter config`` lists and checks these keys too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from arbiter.config import Config, Property, Schema, load_config

__all__ = [
    "ENV_CONF",
    "HOME",
    "REGISTRY_PATH",
    "REPLANNER_SCHEMA",
    "registry_path",
    "replanner_config",
    "replanner_home",
]

ENV_CONF: Final = "QOOP_HIVE_CONF"  # the configuration file qoop-hive reads, if set
HOME: Final = "qoop.hive.home"
REGISTRY_PATH: Final = "qoop.hive.registry.path"

REPLANNER_SCHEMA: Final = Schema(
    "qoop.hive.",
    (
        Property(
            HOME,
            "~/.qoop-hive",
            str,
            lambda v: bool(v),
            "a directory path",
            "qoop-hive's own directory; the local engine's work dir is its engine/ "
            "(qoop-hive engine --workdir)",
        ),
        Property(
            REGISTRY_PATH,
            "~/.qoop-hive/registry.db",
            str,
            lambda v: bool(v),
            "a file path",
            "the durable checkpoint registry, SQLite (qoop-hive --registry)",
            legacy_env=("QOOP_HIVE_REGISTRY",),
        ),
    ),
)


def replanner_config(environ: Mapping[str, str] | None = None) -> Config:
    """The ``qoop.hive.*`` values: defaults, ``$QOOP_HIVE_CONF``'s file, then the environment
    (``environ``, default ``os.environ``); a bad value raises
    :class:`~arbiter.config.ConfigError` naming the key and its source."""
    env = os.environ if environ is None else environ
    return load_config(env.get(ENV_CONF) or None, env, schemas=(REPLANNER_SCHEMA,))


def replanner_home(environ: Mapping[str, str] | None = None) -> Path:
    """``qoop.hive.home`` (``~`` expanded): ``$QOOP_HIVE_HOME``, else the file's, else
    ``~/.qoop-hive``."""
    return Path(replanner_config(environ)[HOME]).expanduser()


def registry_path(environ: Mapping[str, str] | None = None) -> Path:
    """``qoop.hive.registry.path`` (``~`` expanded): ``$QOOP_HIVE_REGISTRY``, else
    ``$QOOP_HIVE_REGISTRY_PATH``, else the file's, else ``~/.qoop-hive/registry.db``."""
    return Path(replanner_config(environ)[REGISTRY_PATH]).expanduser()
