"""The ResourceManager's web address(es) from a Hadoop configuration directory.

An operator points the bridge at the cluster's own configuration (``serve --hadoop-conf DIR``
or ``$HADOOP_CONF_DIR``) instead of typing URLs: this reads ``DIR/yarn-site.xml`` (with
``core-site.xml`` for variables it may use) as Hadoop's ``YarnConfiguration`` does
(:mod:`arbiter.hadoop_xml`: ``${var}`` expansion, ``<final>``) and returns one URL per RM:

* with ``yarn.resourcemanager.ha.enabled`` true, one per id of
  ``yarn.resourcemanager.ha.rm-ids``: ``yarn.resourcemanager.webapp.address.<id>`` (or
  ``.webapp.https.address.<id>`` when ``yarn.http.policy`` is ``HTTPS_ONLY``), else
  ``yarn.resourcemanager.hostname.<id>`` with the default port;
* otherwise ``yarn.resourcemanager.webapp.address`` (``.webapp.https.address``), else
  ``yarn.resourcemanager.hostname`` with the default port (8088, or 8090 for HTTPS), as
  ``yarn-default.xml`` defines them.

Hadoop ResourceManager HA (``yarn.resourcemanager.ha.*``), ``yarn-default.xml``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from arbiter.hadoop_xml import expand, read_site_xml

__all__ = ["rm_urls_from_conf", "rm_urls_from_conf_dir"]

RM = "yarn.resourcemanager."


def rm_urls_from_conf(props: Mapping[str, str]) -> list[str]:
    """The RM web URLs that the (expanded) ``props`` of a yarn-site.xml name.

    >>> rm_urls_from_conf({"yarn.resourcemanager.hostname": "rm.example"})
    ['http://rm.example:8088']
    >>> rm_urls_from_conf({"yarn.resourcemanager.ha.enabled": "true",
    ...     "yarn.resourcemanager.ha.rm-ids": "rm1, rm2",
    ...     "yarn.resourcemanager.webapp.address.rm1": "a.example:8088",
    ...     "yarn.resourcemanager.hostname.rm2": "b.example"})
    ['http://a.example:8088', 'http://b.example:8088']
    """
    https = props.get("yarn.http.policy", "HTTP_ONLY").strip().upper() == "HTTPS_ONLY"
    scheme, port = ("https", 8090) if https else ("http", 8088)
    webapp = f"{RM}webapp.https.address" if https else f"{RM}webapp.address"

    def url(address: str | None, host: str | None, what: str) -> str:
        if address and not address.startswith("0.0.0.0"):
            return f"{scheme}://{address.strip()}"
        if host and host.strip() and host.strip() != "0.0.0.0":
            return f"{scheme}://{host.strip()}:{port}"
        raise ValueError(
            f"yarn-site.xml names no web address for {what} ({webapp} or {RM}hostname)"
        )

    if props.get(f"{RM}ha.enabled", "false").strip().lower() == "true":
        ids = [i.strip() for i in props.get(f"{RM}ha.rm-ids", "").split(",") if i.strip()]
        if not ids:
            raise ValueError(f"yarn-site.xml: {RM}ha.enabled is true but {RM}ha.rm-ids is empty")
        return [
            url(props.get(f"{webapp}.{i}"), props.get(f"{RM}hostname.{i}"), f"RM {i}") for i in ids
        ]
    return [url(props.get(webapp), props.get(f"{RM}hostname"), "the ResourceManager")]


def rm_urls_from_conf_dir(conf_dir: str | Path, environ: Mapping[str, str]) -> list[str]:
    """:func:`rm_urls_from_conf` of ``conf_dir``'s core-site.xml and yarn-site.xml (the latter
    wins, a final property excepted). Raises ``ValueError`` naming what is missing."""
    conf = Path(conf_dir)
    site = conf / "yarn-site.xml"
    if not site.is_file():
        raise ValueError(f"no yarn-site.xml in {conf} (the Hadoop configuration directory)")
    props: dict[str, str] = {}
    finals: set[str] = set()
    for name in ("core-site.xml", "yarn-site.xml"):
        file = conf / name
        if file.is_file():
            for key, prop in read_site_xml(file).items():
                if key in finals:
                    continue
                props[key] = prop.value
                if prop.final:
                    finals.add(key)
    expanded = {k: expand(v, props, environ) for k, v in props.items()}
    return rm_urls_from_conf(expanded)
