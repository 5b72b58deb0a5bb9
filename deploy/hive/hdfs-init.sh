#!/usr/bin/env bash
# One-shot HDFS preparation for Hive on Tez on YARN (the hdfs-init service in
# docker-compose.yml; runs in the Hive image, HADOOP_CONF_DIR=/hive-conf, as the HDFS
# superuser through HADOOP_USER_NAME=hadoop). Idempotent: every start re-creates what is missing
# and re-uploads the Tez jars.
#
#   /tmp, /tmp/hive            Hive scratch space (hive.exec.scratchdir), world-writable + sticky
#   /user/hive/warehouse       managed tables (hive.metastore.warehouse.dir)
#   /user/hive/external        external tables (hive.metastore.warehouse.external.dir)
#   /apps/tez, /apps/tez/lib   Tez's jars, named by tez.lib.uris in tez-site.xml. The apache/hive
#                              image ships them unpacked in $TEZ_HOME (no tez.tar.gz).
set -euo pipefail

TEZ_HOME=${TEZ_HOME:-/opt/tez}
TEZ_HDFS_DIR=${TEZ_HDFS_DIR:-/apps/tez}
WAIT_SECONDS=${WAIT_SECONDS:-300}

echo "hdfs-init: waiting for a live DataNode (up to ${WAIT_SECONDS}s)"
deadline=$((SECONDS + WAIT_SECONDS))
until hdfs dfsadmin -report -live 2>/dev/null | grep -Eq 'Live datanodes \([1-9]'; do
  if ((SECONDS >= deadline)); then
    echo "hdfs-init: no live DataNode after ${WAIT_SECONDS}s" >&2
    exit 1
  fi
  sleep 3
done
hdfs dfsadmin -safemode wait

hdfs dfs -mkdir -p /tmp/hive /user/hive/warehouse /user/hive/external "$TEZ_HDFS_DIR/lib"
hdfs dfs -chmod 1777 /tmp /tmp/hive
hdfs dfs -chmod -R 0777 /user/hive
hdfs dfs -chown -R hive /user/hive

shopt -s nullglob
top=("$TEZ_HOME"/*.jar)
lib=("$TEZ_HOME"/lib/*.jar)
if ((${#top[@]} == 0)); then
  echo "hdfs-init: no Tez jars in $TEZ_HOME" >&2
  exit 1
fi
hdfs dfs -put -f "${top[@]}" "$TEZ_HDFS_DIR/"
if ((${#lib[@]} > 0)); then
  hdfs dfs -put -f "${lib[@]}" "$TEZ_HDFS_DIR/lib/"
fi
hdfs dfs -chmod -R 0755 "$TEZ_HDFS_DIR"
echo "hdfs-init: uploaded ${#top[@]} + ${#lib[@]} Tez jars to $TEZ_HDFS_DIR; HDFS ready"
