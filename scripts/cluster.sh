#!/usr/bin/env bash
# A cluster of imserver nodes on one machine: one PostgreSQL, N nodes, and nginx in front of them
# (WebSocket proxying), so that clients and the app's server use one address.
#
#   scripts/cluster.sh start [NODES] [DIR] [PORT]   NODES nodes (default 3), state in DIR (default
#                                                   ./cluster), nginx on 127.0.0.1:PORT (default 8080)
#   scripts/cluster.sh stop [DIR]                   stops nginx, the nodes, and the PostgreSQL this
#                                                   script started (its data stays in DIR)
#
# The nodes use $IMSERVER_DATABASE_URL when it is set (an existing PostgreSQL), else a private
# PostgreSQL in DIR/postgres (scripts/postgres.sh). The imserver binary is $IMSERVER_BIN, else the
# release build (`swift build -c release` first). nginx comes from Debian's packages (installed if
# missing). Node i listens on PORT+i; every node serves any client and any Server API call.
set -euo pipefail
cd "$(dirname "$0")/.."

command="${1:-}"
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

case "$command" in
  start)
    nodes="${2:-3}"
    dir="${3:-./cluster}"
    port="${4:-8080}"
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    bin="${IMSERVER_BIN:-$(swift build -c release --show-bin-path)/imserver}"
    if ! [ -x "$bin" ]; then
      echo "cluster.sh: no imserver binary at $bin: run 'swift build -c release' (or set IMSERVER_BIN)" >&2
      exit 1
    fi
    if ! command -v nginx >/dev/null 2>&1 && ! [ -x /usr/sbin/nginx ]; then
      echo "cluster.sh: installing nginx from Debian's packages" >&2
      as_root apt-get update -qq >&2
      DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq nginx-light >&2
      as_root service nginx stop >/dev/null 2>&1 || true
    fi
    nginx_bin="$(command -v nginx || echo /usr/sbin/nginx)"
    database="${IMSERVER_DATABASE_URL:-}"
    if [ -z "$database" ]; then
      database="$(scripts/postgres.sh start "$dir/postgres")"
      touch "$dir/own-postgres"
    fi
    upstream=""
    for i in $(seq 1 "$nodes"); do
      node_port=$((port + i))
      # The first node creates the development app; the others find it in the database.
      "$bin" serve --database "$database" --node-id "node$i" --host 127.0.0.1 --port "$node_port" \
        --data-dir "$dir/node$i" >"$dir/node$i.log" 2>&1 &
      echo $! >"$dir/node$i.pid"
      upstream="$upstream        server 127.0.0.1:$node_port max_fails=1 fail_timeout=5s;"$'\n'
      for _ in $(seq 1 100); do
        grep -q "imserver listening" "$dir/node$i.log" && break
        if ! kill -0 "$(cat "$dir/node$i.pid")" 2>/dev/null; then
          echo "cluster.sh: node$i exited; its log:" >&2
          cat "$dir/node$i.log" >&2
          exit 1
        fi
        sleep 0.2
      done
    done
    mkdir -p "$dir/nginx/logs"
    cat >"$dir/nginx/nginx.conf" <<EOF
worker_processes 1;
pid $dir/nginx/nginx.pid;
error_log $dir/nginx/logs/error.log warn;
events { worker_connections 16384; }
http {
    access_log off;
    upstream imserver {
        least_conn;
$upstream    }
    map \$http_upgrade \$connection_upgrade { default upgrade; '' close; }
    server {
        listen 127.0.0.1:$port;
        client_max_body_size 200m;
        location / {
            proxy_pass http://imserver;
            proxy_http_version 1.1;
            # WebSocket: pass the upgrade through, and keep idle client connections open past
            # the heartbeat interval (30 s).
            proxy_set_header Upgrade \$http_upgrade;
            proxy_set_header Connection \$connection_upgrade;
            proxy_set_header Host \$host;
            proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
            proxy_read_timeout 120s;
            proxy_send_timeout 120s;
            proxy_next_upstream error timeout;
        }
    }
}
EOF
    "$nginx_bin" -p "$dir/nginx" -c "$dir/nginx/nginx.conf"
    grep -h "app key\|app secret" "$dir/node1.log" | head -2
    echo "cluster of $nodes nodes on $database"
    echo "clients and the Server API: http://127.0.0.1:$port  (WebSocket: ws://127.0.0.1:$port/ws)"
    ;;
  stop)
    dir="${2:-./cluster}"
    dir="$(cd "$dir" && pwd)"
    nginx_bin="$(command -v nginx || echo /usr/sbin/nginx)"
    if [ -f "$dir/nginx/nginx.pid" ]; then "$nginx_bin" -p "$dir/nginx" -c "$dir/nginx/nginx.conf" -s quit || true; fi
    for pidfile in "$dir"/node*.pid; do
      [ -f "$pidfile" ] || continue
      kill -TERM "$(cat "$pidfile")" 2>/dev/null || true
      rm -f "$pidfile"
    done
    wait 2>/dev/null || true
    if [ -f "$dir/own-postgres" ]; then
      sleep 1
      scripts/postgres.sh stop "$dir/postgres"
    fi
    ;;
  *)
    echo "usage: $0 start [NODES] [DIR] [PORT] | stop [DIR]" >&2
    exit 64
    ;;
esac
