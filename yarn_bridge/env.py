"""Names shared by ``yarn-arbiter submit``, the bridge, the example application masters and the
docker-compose cluster: the environment an ML application master receives, and the
environment the arbiter container reads."""

from __future__ import annotations

__all__ = [
    "ENV_APP_ID",
    "ENV_APP_TOKEN",
    "ENV_ARBITER_ADDRESS",
    "ENV_ARBITER_TLS_CA",
    "ENV_RM_URL",
    "ML_APP_TAG",
]

# Handed to an ML application master by `yarn-arbiter submit` (in its container environment).
ENV_ARBITER_ADDRESS = "YARN_ARBITER_ADDRESS"  # host:port of the arbiter's gRPC endpoint
ENV_APP_ID = "YARN_ARBITER_APP_ID"  # the app's id in the arbiter (app-<hex>, not the YARN id)
ENV_APP_TOKEN = "YARN_ARBITER_APP_TOKEN"  # the per-app token (never logged)
ENV_ARBITER_TLS_CA = "YARN_ARBITER_TLS_CA"  # CA bundle path when the arbiter serves TLS

# Read by `yarn-arbiter serve` when --rm-url is not given: comma-separated RM web URLs (RM HA).
ENV_RM_URL = "YARN_ARBITER_RM_URL"

# YARN application tag that marks an app as an arbiter-managed ML app.
ML_APP_TAG = "yarn-arbiter-ml"
