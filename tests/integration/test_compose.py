"""deploy/: the compose cluster's files agree with each other (no Docker needed).

Parses the top-level ``docker-compose.yml`` with PyYAML and the Hadoop/Hive XML in
``deploy/conf`` with ElementTree, and checks what a typo would break at ``docker compose up``
time: pinned images, dependencies, mounts, published ports against ``deploy/README.md``, the
RM URLs the arbiters use, the arbiters' environment and configuration file, one story about
``yarn.io/gpu`` told by resource-types.xml, the NodeManagers' capacity and the Capacity
Scheduler's queues, and the two HA pairs on one ZooKeeper: the ResourceManagers' keys (the same
as the local pair's, ``yarn-arbiter hadoop up --ha``) and the arbiters' (``serve --ha-zk``).
"""

from __future__ import annotations

import json
import re
import shlex
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from support import REPO

import yarn_bridge.env as bridge_env
from arbiter.agent import arbiter_addresses
from arbiter.config import SCHEMA, env_name, load_config
from arbiter.ha import HaSettings
from yarn_bridge.ha_local import HaPairFiles
from yarn_bridge.hadoop_conf import rm_urls_from_conf
from yarn_bridge.local_hadoop import LocalHadoopSpec
from yarn_bridge.local_hadoop.config import RMPorts, read_site, site_overrides, write_conf_dir

ROOT = REPO
DEPLOY = ROOT / "deploy"
CONF = DEPLOY / "conf"
COMPOSE = ROOT / "docker-compose.yml"  # at the top level, as the design card has it
README = DEPLOY / "README.md"
GPU = "yarn.io/gpu"
QUEUES = {"default", "analytics", "gpu"}
ARBITERS = ("arbiter-1", "arbiter-2")
ZOOKEEPER = "zookeeper:2181"


# -- helpers -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


def hadoop_conf(name: str) -> dict[str, str]:
    """A Hadoop-style ``<configuration><property><name/><value/>`` file as a dict."""
    root = ET.parse(CONF / name).getroot()
    assert root.tag == "configuration", name
    out: dict[str, str] = {}
    for prop in root.iter("property"):
        key, value = prop.findtext("name"), prop.findtext("value")
        assert key is not None and value is not None, f"{name}: property without name/value"
        assert key.strip() not in out, f"{name}: {key} declared twice"
        out[key.strip()] = value.strip()
    return out


def vector(text: str) -> dict[str, int]:
    """``[memory=4096,vcores=4,yarn.io/gpu=8]`` -> ``{"memory": 4096, ...}``."""
    m = re.fullmatch(r"\[(.*)\]", text.strip())
    assert m, f"not an absolute resource vector: {text!r}"
    pairs = (item.split("=", 1) for item in m.group(1).split(",") if item.strip())
    return {k.strip(): int(v) for k, v in pairs}


def command(svc: dict[str, Any]) -> list[str]:
    cmd = svc.get("command", [])
    return shlex.split(cmd) if isinstance(cmd, str) else [str(c) for c in cmd]


def flag(cmd: list[str], name: str) -> str:
    assert name in cmd, f"{name} missing from {cmd}"
    return cmd[cmd.index(name) + 1]


def environment(svc: dict[str, Any]) -> dict[str, str]:
    env = svc.get("environment", {})
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: str(v) for k, v in env.items()}


def volumes(svc: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(source, target) of every short-syntax volume entry."""
    for entry in svc.get("volumes", []):
        assert isinstance(entry, str), f"use the short volume syntax: {entry!r}"
        source, target = entry.split(":")[:2]
        yield source, target


def published(svc: dict[str, Any]) -> Iterator[tuple[int, int]]:
    """(host port, container port) of every published port."""
    for entry in svc.get("ports", []):
        parts = str(entry).split(":")
        assert len(parts) == 3 and parts[0] == "127.0.0.1", f"bind to 127.0.0.1: {entry!r}"
        yield int(parts[1]), int(parts[2])


def dependencies(svc: dict[str, Any]) -> dict[str, str]:
    deps = svc.get("depends_on", {})
    if isinstance(deps, list):
        return dict.fromkeys(deps, "service_started")
    return {name: spec.get("condition", "service_started") for name, spec in deps.items()}


def one_shot(svc: dict[str, Any]) -> bool:
    return str(svc.get("restart", "no")) == "no"


def dockerfile_froms(path: Path) -> list[str]:
    return [
        line.split()[1]
        for line in path.read_text().splitlines()
        if line.strip().upper().startswith("FROM ")
    ]


def pinned(image: str) -> bool:
    if "@sha256:" in image:
        return True
    name, _, tag = image.rpartition(":")
    return bool(name) and "/" not in tag and tag not in ("", "latest")


def daemons(services: dict[str, dict[str, Any]], *cmd: str) -> list[str]:
    """Services whose command is ``cmd`` (options after it allowed: ``-D key=value``)."""
    return [name for name, svc in services.items() if command(svc)[: len(cmd)] == list(cmd)]


def resourcemanagers(services: dict[str, dict[str, Any]]) -> dict[str, str]:
    """RM HA id -> the service running that RM (``yarn resourcemanager -D ...ha.id=ID``)."""
    out = {}
    for name in daemons(services, "yarn", "resourcemanager"):
        cmd = command(services[name])
        assert cmd[2:3] == ["-D"], f"{name}: the RM is told its HA id with -D"
        key, _, rid = cmd[3].partition("=")
        assert key == "yarn.resourcemanager.ha.id" and rid, f"{name}: {cmd}"
        out[rid] = name
    return out


def arbiter_environ(svc: dict[str, Any]) -> dict[str, str]:
    """The settings ``serve`` sees in this container: its environment plus its flags as the
    configuration's environment names (as yarn_arbiter.cli's _cmd_serve sets them)."""
    cmd = command(svc)
    env = environment(svc)
    flags = {"--port": "arbiter.grpc.port", "--ha-zk": "arbiter.ha.zk-address",
             "--ha-id": "arbiter.ha.id", "--journal": "arbiter.journal.path"}  # fmt: skip
    for opt, key in flags.items():
        if opt in cmd:
            env[env_name(key)] = flag(cmd, opt)
    return env


def hive_dockerfile() -> Path:
    return DEPLOY / "hive" / "Dockerfile"


def mounted_at(svc: dict[str, Any], target: str) -> Path:
    for source, tgt in volumes(svc):
        if tgt == target:
            return (ROOT / source).resolve()
    raise AssertionError(f"nothing mounted at {target}")


# -- images, dependencies, mounts, ports -------------------------------------------------------


def test_every_image_is_pinned(services: dict[str, dict[str, Any]]) -> None:
    for name, svc in services.items():
        assert "image" in svc, f"{name}: name the image (built ones too) with a tag"
        assert pinned(svc["image"]), f"{name}: image {svc['image']!r} is not pinned"
        if "build" in svc:
            build = svc["build"]
            context = ROOT / (build if isinstance(build, str) else build["context"])
            dockerfile = context / (
                "Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile")
            )
            assert dockerfile.is_file(), f"{name}: {dockerfile} missing"
            for base in dockerfile_froms(dockerfile):
                assert pinned(base), f"{dockerfile}: base image {base!r} is not pinned"


def test_arbiter_image_copies_what_pip_install_needs(services: dict[str, dict[str, Any]]) -> None:
    builds = {
        json.dumps(services[n]["build"], sort_keys=True) for n in (*ARBITERS, "arbiter-creds")
    }
    assert len(builds) == 1  # one image for the pair and its credentials step
    build = services["arbiter-1"]["build"]
    context = (ROOT / build["context"]).resolve()
    dockerfile = context / build["dockerfile"]
    froms = dockerfile_froms(dockerfile)
    assert froms and froms[0].startswith("python:3.11-slim")
    for line in dockerfile.read_text().splitlines():
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                assert (context / source).exists(), f"{dockerfile}: COPY {source} not in context"
    ignore = dockerfile.with_name(dockerfile.name + ".dockerignore").read_text().split()
    assert ".venv" in ignore and ".git" in ignore


def test_dependencies_exist_and_can_be_met(services: dict[str, dict[str, Any]]) -> None:
    conditions = {"service_started", "service_healthy", "service_completed_successfully"}
    for name, svc in services.items():
        for target, condition in dependencies(svc).items():
            assert target in services, f"{name} depends on unknown service {target}"
            assert condition in conditions, f"{name} -> {target}: condition {condition!r}"
            if condition == "service_healthy":
                assert "healthcheck" in services[target], f"{target} has no healthcheck"
            if condition == "service_completed_successfully":
                assert one_shot(services[target]), f"{target} restarts; it never completes"


def test_long_running_services_have_healthchecks(services: dict[str, dict[str, Any]]) -> None:
    for name, svc in services.items():
        if not one_shot(svc):
            test = svc.get("healthcheck", {}).get("test")
            assert test and test[0] in ("CMD", "CMD-SHELL"), f"{name}: no healthcheck"


def test_mounts_exist_and_named_volumes_are_declared(compose: dict[str, Any]) -> None:
    declared = set(compose.get("volumes") or {})
    used = set()
    for name, svc in compose["services"].items():
        for source, target in volumes(svc):
            if source.startswith("."):
                path = (ROOT / source).resolve()
                assert path.is_file(), f"{name}: mounted file {source} does not exist"
                assert path.parent == CONF, f"{name}: config {source} is not in deploy/conf"
                assert path.name == Path(target).name, f"{name}: {source} mounted as {target}"
            else:
                assert source in declared, f"{name}: named volume {source} not declared"
                used.add(source)
    assert used == declared, f"declared but unused volumes: {declared - used}"


def test_published_ports_are_unique_and_documented(services: dict[str, dict[str, Any]]) -> None:
    ports = [(host, name, cont) for name, svc in services.items() for host, cont in published(svc)]
    hosts = [host for host, _, _ in ports]
    assert len(hosts) == len(set(hosts)), f"host port published twice: {sorted(hosts)}"
    section = README.read_text().split("## Ports", 1)[1].split("\n## ", 1)[0]
    table = set()
    for line in section.splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].isdigit():
            table.add((int(cells[0]), cells[1], int(cells[2])))
    assert table == set(ports), (
        f"README ports table and compose differ: only in README {table - set(ports)}, "
        f"only in compose {set(ports) - table}"
    )


# -- the arbiter -------------------------------------------------------------------------------


def test_arbiters_serve_the_rm_pair_yarn_site_names(services: dict[str, dict[str, Any]]) -> None:
    yarn = hadoop_conf("yarn-site.xml")
    urls = rm_urls_from_conf(yarn)  # what `serve --hadoop-conf` would read
    rms = resourcemanagers(services)
    assert len(urls) == len(rms) == 2
    for url, rid in zip(urls, yarn["yarn.resourcemanager.ha.rm-ids"].split(","), strict=True):
        parts, rm = urlsplit(url), services[rms[rid]]
        assert parts.hostname == rm["hostname"] == rms[rid]
        assert parts.port in {container for _, container in published(rm)}
        assert f":{parts.port}/" in " ".join(rm["healthcheck"]["test"])
    for name in ARBITERS:
        arbiter = services[name]
        cmd = command(arbiter)
        assert cmd[:2] == ["yarn-arbiter", "serve"]
        assert flag(cmd, "--rm-url").split(",") == urls
        assert environment(arbiter)[bridge_env.ENV_RM_URL].split(",") == urls
        for rm in rms.values():
            assert dependencies(arbiter)[rm] == "service_healthy"


def test_arbiter_environment_uses_shared_names(services: dict[str, dict[str, Any]]) -> None:
    shared = {getattr(bridge_env, n) for n in bridge_env.__all__ if n.startswith("ENV_")}
    overrides = {env_name(key) for key in SCHEMA}
    for name in ARBITERS:
        env = environment(services[name])
        unknown = set(env) - shared - overrides
        assert not unknown, f"{name} env names not in yarn_bridge/env.py nor config keys: {unknown}"
        # Application masters in YARN containers dial the pair by compose names: both of them.
        addresses = arbiter_addresses(env[bridge_env.ENV_ARBITER_ADDRESS])
        port = int(flag(command(services[name]), "--port"))
        assert addresses == tuple(f"{services[a]['hostname']}:{port}" for a in ARBITERS)
        assert services[name]["hostname"] == name


def test_arbiter_config_file_validates(services: dict[str, dict[str, Any]]) -> None:
    for name in ARBITERS:
        arbiter = services[name]
        cmd = command(arbiter)
        path = mounted_at(arbiter, flag(cmd, "--config"))
        assert load_config(path, environ={})  # raises ConfigError naming any bad key
        # what serve runs with in the container: the file, its environment and its flags
        config = load_config(path, environ=arbiter_environ(arbiter))
        port = int(flag(cmd, "--port"))
        assert config["arbiter.grpc.port"] == port
        assert ("--journal" not in cmd) and config["arbiter.ha.zk-address"]  # journal: ZooKeeper
        ports = set(published(arbiter))
        assert len(ports) == 1 and next(iter(ports))[1] == port
        probe = arbiter["healthcheck"]["test"]
        assert probe[:3] == ["CMD", "python", "-c"]
        assert f"localhost:{config['arbiter.metrics.port']}/healthz" in probe[3]
        assert config["arbiter.metrics.bind-host"] == "127.0.0.1"  # the probe runs inside
        compile(probe[3], "healthcheck", "exec")


# -- the two HA pairs on one ZooKeeper ---------------------------------------------------------


def test_the_resourcemanagers_are_an_ha_pair_on_zookeeper(
    services: dict[str, dict[str, Any]],
) -> None:
    yarn = hadoop_conf("yarn-site.xml")
    rms = resourcemanagers(services)
    assert yarn["yarn.resourcemanager.ha.enabled"] == "true"
    assert yarn["yarn.resourcemanager.ha.rm-ids"].split(",") == sorted(rms) == ["rm1", "rm2"]
    assert "yarn.resourcemanager.ha.id" not in yarn  # each RM's own, on its command line
    for rid, name in rms.items():
        host = services[name]["hostname"]
        assert yarn[f"yarn.resourcemanager.hostname.{rid}"] == host
        for key in ("address", "scheduler.address", "resource-tracker.address", "admin.address",
                    "webapp.address"):  # fmt: skip
            assert yarn[f"yarn.resourcemanager.{key}.{rid}"].split(":")[0] == host, (rid, key)
        assert dependencies(services[name])["zookeeper"] == "service_healthy"
        for f in ("yarn-site.xml", "capacity-scheduler.xml", "resource-types.xml"):
            assert mounted_at(services[name], f"/opt/hadoop/etc/hadoop/{f}") == CONF / f
    # state, election and the mutable scheduler configuration in the ZooKeeper service
    zk_host, zk_port = ZOOKEEPER.split(":")
    assert services[zk_host]["hostname"] == zk_host and zk_port == "2181"
    assert yarn["hadoop.zk.address"] == yarn["yarn.resourcemanager.zk-address"] == ZOOKEEPER
    assert yarn["yarn.resourcemanager.store.class"].endswith(".recovery.ZKRMStateStore")
    assert yarn["yarn.scheduler.configuration.store.class"] == "zk"
    assert yarn["yarn.resourcemanager.recovery.enabled"] == "true"
    assert yarn["yarn.admin.acl"] == "*"
    # the NodeManagers (and HiveServer2) wait for both: they fail over between them
    for name in [*daemons(services, "yarn", "nodemanager"), "hiveserver2"]:
        assert {dependencies(services[name])[rm] for rm in rms.values()} == {"service_healthy"}


def test_rm_ha_keys_are_the_local_pairs(tmp_path: Path) -> None:
    """`yarn-arbiter hadoop up --ha` (yarn_bridge/local_hadoop) configures its RM pair with the
    keys deploy/conf gives the compose pair: every HA key the local pair sets is set here, with
    the same value where no host or port is in it."""
    ports = {r: RMPorts(1, 2, 3, 4, 5) for r in ("rm1", "rm2")}
    local = site_overrides(LocalHadoopSpec(tmp_path, ha=True), jars=tmp_path, rm_ports=ports,
                           nm=None, zk_port=2181)["yarn-site.xml"]  # fmt: skip
    yarn = hadoop_conf("yarn-site.xml")
    prefixes = (
        "yarn.resourcemanager.ha.",
        "yarn.resourcemanager.zk",
        "hadoop.zk.",
        "yarn.client.failover",
        "yarn.resourcemanager.cluster-id",
        "yarn.resourcemanager.store.class",
        "yarn.resourcemanager.recovery.",
        "yarn.resourcemanager.work-preserving",
        "yarn.scheduler.configuration.store.",
    )
    ha_keys = [k for k in local if k.startswith(prefixes) or k.endswith((".rm1", ".rm2"))]
    assert len(ha_keys) >= 20
    missing = [k for k in ha_keys if k not in yarn]
    assert not missing, f"the local RM pair sets keys deploy/conf does not: {missing}"
    hosty = re.compile(r"127\.0\.0\.1|:\d+$|^yarn-arbiter-")
    for k in ha_keys:
        if not hosty.search(local[k]):
            assert yarn[k] == local[k], k


def test_the_local_single_rm_is_not_ha(tmp_path: Path) -> None:
    """deploy/conf is the local YARN's base configuration too: without --ha its one RM keeps a
    file-system state store and scheduler configuration, with HA off."""
    conf = write_conf_dir(tmp_path / "etc", site_overrides(
        LocalHadoopSpec(tmp_path), jars=tmp_path, rm_ports={"rm1": RMPorts(1, 2, 3, 4, 5)},
        nm=None, zk_port=None))  # fmt: skip
    yarn = read_site(conf / "yarn-site.xml")
    assert yarn["yarn.resourcemanager.ha.enabled"] == "false"
    assert yarn["yarn.resourcemanager.store.class"].endswith(".FileSystemRMStateStore")
    assert yarn["yarn.scheduler.configuration.store.class"] == "fs"
    assert rm_urls_from_conf(yarn) == ["http://127.0.0.1:5"]


def test_the_arbiters_are_an_ha_pair_on_the_rms_zookeeper(
    services: dict[str, dict[str, Any]],
) -> None:
    yarn = hadoop_conf("yarn-site.xml")
    settings = {}
    for name in ARBITERS:
        arbiter = services[name]
        config = load_config(mounted_at(arbiter, flag(command(arbiter), "--config")),
                             environ=arbiter_environ(arbiter))  # fmt: skip
        ha = HaSettings.from_config(config)  # raises naming what the pair lacks
        assert ha is not None
        settings[name] = ha
        assert dependencies(arbiter)["zookeeper"] == "service_healthy"
        assert dependencies(arbiter)["arbiter-creds"] == "service_completed_successfully"
    a, b = (settings[n] for n in ARBITERS)
    # the same ZooKeeper as the RM pair, the same root, two names, each advertising itself
    assert a.zk_address == b.zk_address == yarn["hadoop.zk.address"] == ZOOKEEPER
    assert a.root == b.root and a.root.startswith("/yarn-arbiter/")
    assert not a.root.startswith(("/yarn-leader-election", "/rmstore"))
    assert {a.ha_id, b.ha_id} == set(ARBITERS)
    port = int(flag(command(services["arbiter-1"]), "--port"))
    assert [s.advertise for s in (a, b)] == [f"{n}:{port}" for n in ARBITERS]
    # clients get both addresses, in the form agents and subscribers parse
    for name in ARBITERS:
        listed = arbiter_addresses(environment(services[name])[bridge_env.ENV_ARBITER_ADDRESS])
        assert listed == (a.advertise, b.advertise)
        assert ",".join(listed) == f"arbiter-1:{port},arbiter-2:{port}"


def test_the_pair_shares_credentials_from_one_step(
    services: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    creds = services["arbiter-creds"]
    assert one_shot(creds)
    ((volume, target),) = [(s, t) for s, t in volumes(creds) if not s.startswith(".")]
    step = command(creds)
    assert step[:2] == ["python", "-c"] and f"HaPairFiles.create(Path('{target}'))" in step[2]
    compile(step[2], "arbiter-creds", "exec")
    written = HaPairFiles.create(tmp_path)  # what that step writes, by the same helper
    for name in ARBITERS:
        arbiter = services[name]
        config = load_config(mounted_at(arbiter, flag(command(arbiter), "--config")), environ={})
        mounts = {t: s for s, t in volumes(arbiter)}
        assert mounts[target] == volume
        for key, which in (("arbiter.admin.token-file", "admin"),
                           ("arbiter.admission.submit-token-file", "submit"),
                           ("arbiter.query.service-token-file", "service")):  # fmt: skip
            path = Path(config[key])
            assert str(path.parent) == target and path.name == getattr(written, which).name
            assert (tmp_path / path.name).stat().st_mode & 0o077 == 0


# -- Hadoop and Hive configuration -------------------------------------------------------------


def test_xml_configs_parse() -> None:
    files = sorted(CONF.glob("*.xml"))
    assert {f.name for f in files} >= {
        "core-site.xml",
        "hdfs-site.xml",
        "yarn-site.xml",
        "mapred-site.xml",
        "capacity-scheduler.xml",
        "resource-types.xml",
        "hive-site.xml",
        "tez-site.xml",
        "arbiter-site.xml",
    }
    for f in files:
        assert hadoop_conf(f.name), f"{f.name} is empty"


def test_hostnames_in_configs_are_services(services: dict[str, dict[str, Any]]) -> None:
    core, hdfs = hadoop_conf("core-site.xml"), hadoop_conf("hdfs-site.xml")
    namenode = urlsplit(core["fs.defaultFS"])
    (nn,) = daemons(services, "hdfs", "namenode")
    assert namenode.hostname == nn == services[nn]["hostname"]
    assert hdfs["dfs.namenode.rpc-address"] == f"{nn}:{namenode.port}"
    assert services[nn]["environment"]["ENSURE_NAMENODE_DIR"] in hdfs["dfs.namenode.name.dir"]
    for name, svc in services.items():
        if name.startswith(("namenode", "datanode", "resourcemanager", "nodemanager")):
            assert svc["hostname"] == name, f"{name}: hostname must equal the service name"


def test_gpus_are_declared_consistently(services: dict[str, dict[str, Any]]) -> None:
    types = hadoop_conf("resource-types.xml")
    yarn = hadoop_conf("yarn-site.xml")
    sched = hadoop_conf("capacity-scheduler.xml")
    assert GPU in [t.strip() for t in types["yarn.resource-types"].split(",")]
    per_nm = int(yarn[f"yarn.nodemanager.resource-type.{GPU}"])
    assert per_nm > 0 and "yarn.nodemanager.resource-plugins" not in yarn  # fake, countable
    assert int(types[f"yarn.resource-types.{GPU}.maximum-allocation"]) == per_nm

    # Every NodeManager (and the RM) reads the same yarn-site.xml and resource-types.xml.
    nms = daemons(services, "yarn", "nodemanager")
    rms = list(resourcemanagers(services).values())
    assert len(nms) == 2 and len(rms) == 2
    for name in [*nms, *rms]:
        for f in ("yarn-site.xml", "resource-types.xml"):
            assert mounted_at(services[name], f"/opt/hadoop/etc/hadoop/{f}") == CONF / f
    for rm in rms:
        assert mounted_at(services[rm], "/opt/hadoop/etc/hadoop/capacity-scheduler.xml").is_file()
    total = {
        "memory": len(nms) * int(yarn["yarn.nodemanager.resource.memory-mb"]),
        "vcores": len(nms) * int(yarn["yarn.nodemanager.resource.cpu-vcores"]),
        GPU: len(nms) * per_nm,
    }

    # The scheduler compares by dominant share and guarantees the gpu queue every GPU.
    assert sched["yarn.scheduler.capacity.resource-calculator"].endswith(
        "DominantResourceCalculator"
    )
    queues = [q.strip() for q in sched["yarn.scheduler.capacity.root.queues"].split(",")]
    assert set(queues) == QUEUES
    prefix = "yarn.scheduler.capacity.root"
    guaranteed = {q: vector(sched[f"{prefix}.{q}.capacity"]) for q in queues}
    maximum = {q: vector(sched[f"{prefix}.{q}.maximum-capacity"]) for q in queues}
    for resource, amount in total.items():
        assert sum(v.get(resource, 0) for v in guaranteed.values()) == amount, resource
        for q in queues:
            assert guaranteed[q].get(resource, 0) <= maximum[q].get(resource, 0) <= amount
    assert guaranteed["gpu"][GPU] == total[GPU]
    assert all(GPU not in guaranteed[q] for q in QUEUES - {"gpu"})
    assert all(v.get(GPU) != 0 for v in [*guaranteed.values(), *maximum.values()])


def test_hive_runs_on_tez_on_yarn(services: dict[str, dict[str, Any]]) -> None:
    hive, tez = hadoop_conf("hive-site.xml"), hadoop_conf("tez-site.xml")
    assert hive["hive.execution.engine"] == "tez"
    assert tez["tez.local.mode"] == "false" and tez["tez.use.cluster.hadoop-libs"] == "true"
    assert hive["tez.queue.name"] in QUEUES - {"gpu"}
    # Pin the SQL's join order; leave hive.query.tag settable per query.
    excluded = re.compile(hive["hive.cbo.rule.exclusion.regex"])
    for rule in ("LoptOptimizeJoinRule", "JoinToMultiJoinRule", "HiveJoinCommuteRule"):
        assert excluded.fullmatch(rule), rule
    assert "hive.query.tag" not in hive.get("hive.conf.restricted.list", "")
    # tez.lib.uris names what hdfs-init uploads, on the cluster's HDFS.
    core = hadoop_conf("core-site.xml")
    script = (DEPLOY / "hive" / "hdfs-init.sh").read_text()
    for uri in tez["tez.lib.uris"].split(","):
        parts = urlsplit(uri)
        assert f"{parts.scheme}://{parts.netloc}" == core["fs.defaultFS"]
        assert parts.path in ("/apps/tez", "/apps/tez/lib")
    assert "TEZ_HDFS_DIR:-/apps/tez" in script and '"$TEZ_HDFS_DIR/lib/"' in script
    copied = re.search(r"^COPY deploy/hive/hdfs-init\.sh (\S+)$", hive_dockerfile().read_text(),
                       re.M)  # fmt: skip
    assert copied and copied.group(1) in services["hdfs-init"]["entrypoint"]
    # The Hive services read the Hadoop client configuration next to hive-site.xml.
    hs2 = services["hiveserver2"]
    needed = {"hive-site.xml", "tez-site.xml", "core-site.xml", "yarn-site.xml"}
    for name in ("hdfs-init", "metastore", "hiveserver2"):
        assert {Path(t).name for _, t in volumes(services[name])} >= needed, name
    assert environment(hs2)["IS_RESUME"] == "true"
    assert "thrift://metastore:9083" in environment(hs2)["SERVICE_OPTS"]
    port = int(hive["hive.server2.thrift.port"])
    assert (port, port) in set(published(hs2))
    assert f"/dev/tcp/localhost/{port}" in " ".join(hs2["healthcheck"]["test"])
    assert dependencies(hs2)["hdfs-init"] == "service_completed_successfully"


def test_metastore_uses_the_postgres_service(services: dict[str, dict[str, Any]]) -> None:
    metastore = services["metastore"]
    env = environment(metastore)
    assert env["DB_DRIVER"] == "postgres" and "IS_RESUME" not in env  # schematool runs here
    url = re.search(r"ConnectionURL=jdbc:postgresql://([^:/]+):(\d+)/(\w+)", env["SERVICE_OPTS"])
    assert url, "metastore: no PostgreSQL JDBC URL in SERVICE_OPTS"
    db = services[url.group(1)]
    assert db["image"].startswith("postgres:") and url.group(2) == "5432"
    assert environment(db)["POSTGRES_DB"] == url.group(3)
    assert dependencies(metastore)[url.group(1)] == "service_healthy"
    # The stock apache/hive image has no PostgreSQL driver; the derived image adds it.
    assert "/opt/hive/lib/postgres.jar" in hive_dockerfile().read_text()
    images = {services[s]["image"] for s in ("hdfs-init", "metastore", "hiveserver2")}
    builds = {json.dumps(services[s]["build"], sort_keys=True)
              for s in ("hdfs-init", "metastore", "hiveserver2")}  # fmt: skip
    assert len(images) == 1 and len(builds) == 1
    build = services["hiveserver2"]["build"]
    assert (ROOT / build["context"] / build["dockerfile"]).resolve() == hive_dockerfile()


def test_hiveserver2_loads_the_arbiter_hooks(services: dict[str, dict[str, Any]]) -> None:
    """The compose HiveServer2 runs the hooks the local one is tested with: the jar in its
    image, their settings in hive-site.xml, the arbiter's query-service credential file on the
    volume the arbiter writes it to, and the same classes hive_engine names."""
    from hive_hooks.hive_engine import PLAN_HOOK, QUERY_HOOK

    hive = hadoop_conf("hive-site.xml")
    assert hive["hive.query.lifetime.hooks"].split(",")[0] == QUERY_HOOK
    assert PLAN_HOOK in hive["hive.exec.pre.hooks"].split(",")
    # both arbiters of the pair, in order (the hooks register with whichever is active)
    pair = [a.split(":") for a in hive["yarn.arbiter.address"].split(",")]
    assert [host for host, _ in pair] == [
        services["arbiter-1"]["hostname"],
        services["arbiter-2"]["hostname"],
    ]
    assert [port for _, port in pair] == [
        flag(command(services["arbiter-1"]), "--port"),
        flag(command(services["arbiter-2"]), "--port"),
    ]
    token = Path(hive["yarn.arbiter.service.token.file"])
    site = mounted_at(services["arbiter-1"], "/etc/yarn-arbiter/arbiter-site.xml")
    arbiter_conf = load_config(site, environ={})
    assert str(token) == arbiter_conf["arbiter.query.service-token-file"]  # the pair's credential
    mounts = {tgt: src for src, tgt in volumes(services["hiveserver2"])}
    assert mounts[str(token.parent)] == "arbiter-creds"
    assert dependencies(services["hiveserver2"])["arbiter-creds"] == (
        "service_completed_successfully"
    )
    assert "yarn.arbiter." in hive["hive.conf.restricted.list"].split(",")
    assert "yarn.arbiter.service.token" in hive["hive.conf.hidden.list"].split(",")
    docker = hive_dockerfile().read_text()
    assert "COPY java/hive-hooks/target/yarn-arbiter-hive-hooks.jar /opt/hive/lib/" in docker


def test_the_bridge_reads_the_compose_queues(services: dict[str, dict[str, Any]]) -> None:
    """The watcher's default analytics queue is Hive's queue, and the compose cluster's
    capacity-scheduler.xml, served by the RM emulator in the compose image's Hadoop line, gives
    the analytics share the analytics queue's guarantee and lets the enforcer set the gpu
    queue's yarn.io/gpu (spec §1.3, §1.6)."""
    from yarn_bridge.emulator import HADOOP_VERSIONS, RMEmulator
    from yarn_bridge.enforcer import with_gpus
    from yarn_bridge.rm import RMClient, SchedConfUpdate
    from yarn_bridge.rm_events import DEFAULT_ANALYTICS_QUEUES, analytics_capacity

    hive, yarn = hadoop_conf("hive-site.xml"), hadoop_conf("yarn-site.xml")
    sched = hadoop_conf("capacity-scheduler.xml")
    assert (hive["tez.queue.name"],) == DEFAULT_ANALYTICS_QUEUES
    cmd = command(services["arbiter-1"])
    assert "--analytics-queue" not in cmd  # the default is the queue above
    version = services["resourcemanager"]["image"].rsplit(":", 1)[1]
    line = version.rsplit(".", 1)[0]
    assert HADOOP_VERSIONS[line] == version  # the emulator serves this RM's shapes

    prefix = "yarn.scheduler.capacity.root"
    queues = [q.strip() for q in sched[f"{prefix}.queues"].split(",")]
    keys = ("resource.memory-mb", "resource.cpu-vcores", f"resource-type.{GPU}")
    nm = {k: int(yarn[f"yarn.nodemanager.{k}"]) for k in keys}
    with RMEmulator(
        nodes=2, memory_mb=nm["resource.memory-mb"], vcores=nm["resource.cpu-vcores"],
        gpus_per_node=nm[f"resource-type.{GPU}"], manual_clock=True, hadoop_version=line,
        queues={q: sched[f"{prefix}.{q}.capacity"] for q in queues},
    ) as emu, RMClient(emu.url, timeout=2.0, deadline=4.0) as rm:  # fmt: skip
        rm.update_scheduler_conf(SchedConfUpdate(update_queue={
            f"root.{q}": {"maximum-capacity": sched[f"{prefix}.{q}.maximum-capacity"]}
            for q in queues}))  # fmt: skip
        r = analytics_capacity(rm.cluster_metrics(), rm.scheduler(), DEFAULT_ANALYTICS_QUEUES)
        analytics = vector(sched[f"{prefix}.analytics.capacity"])
        assert (r.vcores, r.memory_mb) == (analytics["vcores"], analytics["memory"])
        gpu_cap = with_gpus(sched[f"{prefix}.gpu.capacity"], 3)
        assert gpu_cap is not None
        rm.update_scheduler_conf(SchedConfUpdate(update_queue={"root.gpu": {"capacity": gpu_cap}}))
        gpu = rm.scheduler().queue("root.gpu")
        assert gpu.effective_min is not None and gpu.effective_min.gpus == 3
