"""Names shared by ``yarn-arbiter submit``, the bridge, the example application masters and the
docker-compose cluster: the environment an ML application master receives (handed over by
``yarn-arbiter submit`` in its container environment; the Agent's contract, defined in
:mod:`arbiter.agent_env` and re-exported here), and the environment the arbiter container
reads."""

from __future__ import annotations

from arbiter.agent_env import (
    ENV_APP_ID,
    ENV_APP_TOKEN,
    ENV_ARBITER_ADDRESS,
    ENV_ARBITER_TLS_CA,
)

__all__ = [
    "ENV_APP_ID",
    "ENV_APP_TOKEN",
    "ENV_ARBITER_ADDRESS",
    "ENV_ARBITER_TLS_CA",
    "ENV_RM_URL",
    "ML_APP_TAG",
]

# Read by `yarn-arbiter serve` when --rm-url is not given: comma-separated RM web URLs (RM HA).
ENV_RM_URL = "YARN_ARBITER_RM_URL"

# YARN application tag that marks an app as an arbiter-managed ML app.
ML_APP_TAG = "yarn-arbiter-ml"
