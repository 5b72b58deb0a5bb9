"""The environment an ML application master receives: the contract between whoever launches the
AM (``yarn-arbiter submit``, the docker-compose cluster) and the Agent library inside it, which
reads these variables (:func:`arbiter.agent.agent_kwargs_from_env`) to reach the arbiter and
resume its app."""

from __future__ import annotations

__all__ = ["ENV_APP_ID", "ENV_APP_TOKEN", "ENV_ARBITER_ADDRESS", "ENV_ARBITER_TLS_CA"]

ENV_ARBITER_ADDRESS = "YARN_ARBITER_ADDRESS"  # host:port of the arbiter's gRPC endpoint
ENV_APP_ID = "YARN_ARBITER_APP_ID"  # the app's id in the arbiter (app-<hex>, not the YARN id)
ENV_APP_TOKEN = "YARN_ARBITER_APP_TOKEN"  # the per-app token (never logged)
ENV_ARBITER_TLS_CA = "YARN_ARBITER_TLS_CA"  # CA bundle path when the arbiter serves TLS
