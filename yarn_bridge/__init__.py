"""yarn_bridge: ResourceManager REST client, watcher, enforcer and RM emulator.

Placeholder package of the design card's layout; it is built by the yarn_bridge issue
(``../shared/spec/yarn-hive-integration.md``). Nothing here is called yet.
"""
