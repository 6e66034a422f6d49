#!/usr/bin/env bash
# A private PostgreSQL server for the tests and benchmarks: its own data directory, a free port on
# 127.0.0.1, run as a non-root user, stopped by `stop`.
#
#   scripts/postgres.sh start DIR   installs PostgreSQL from Debian's packages if missing, creates
#                                   (once) and starts the server in DIR, and prints its URL
#                                   (postgres://USER@127.0.0.1:PORT/imserver)
#   scripts/postgres.sh stop DIR    stops it (the data stays in DIR)
#   scripts/postgres.sh url DIR     prints the URL of the server running in DIR
set -euo pipefail

command="${1:-}"
dir="${2:-}"
if [ -z "$command" ] || [ -z "$dir" ]; then
  echo "usage: $0 start|stop|url DIR" >&2
  exit 64
fi
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

bindir() {
  local found
  found="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)"
  if [ -z "$found" ] || ! [ -x "$found/initdb" ]; then
    echo "postgres.sh: installing PostgreSQL from Debian's packages" >&2
    as_root apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq postgresql >&2
    # The package starts a system-wide cluster; these tests run their own.
    as_root service postgresql stop >/dev/null 2>&1 || true
    found="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
  fi
  echo "$found"
}

# PostgreSQL refuses to run as root: as root, the server runs as the `postgres` user.
run_user="$(id -un)"
if [ "$(id -u)" = 0 ]; then run_user=postgres; fi
as_user() {
  if [ "$(id -un)" = "$run_user" ]; then "$@"; else runuser -u "$run_user" -- "$@"; fi
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

url() {
  local port
  port="$(cat "$dir/port")"
  echo "postgres://$run_user@127.0.0.1:$port/imserver"
}

case "$command" in
  start)
    bin="$(bindir)"
    if [ "$(id -u)" = 0 ]; then chown "$run_user" "$dir"; fi
    if ! [ -f "$dir/data/PG_VERSION" ]; then
      as_user "$bin/initdb" -D "$dir/data" -U "$run_user" --auth=trust --encoding=UTF8 --locale=C.UTF-8 >"$dir/initdb.log"
      cat >>"$dir/data/postgresql.conf" <<'EOF'
# Written by scripts/postgres.sh: durable commits (fsync and synchronous_commit stay on), room
# for three imserver nodes' pools and the tests' own databases.
listen_addresses = '127.0.0.1'
max_connections = 300
shared_buffers = 512MB
wal_buffers = 16MB
max_wal_size = 4GB
unix_socket_directories = ''
EOF
    fi
    if as_user "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
      url
      exit 0
    fi
    port="$(free_port)"
    echo "$port" >"$dir/port"
    as_user "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -o "-p $port" -w -t 60 start >/dev/null
    if ! as_user "$bin/psql" -h 127.0.0.1 -p "$port" -U "$run_user" -d postgres -tAc \
        "SELECT 1 FROM pg_database WHERE datname = 'imserver'" | grep -q 1; then
      as_user "$bin/createdb" -h 127.0.0.1 -p "$port" -U "$run_user" imserver
    fi
    url
    ;;
  stop)
    bin="$(bindir)"
    if [ -f "$dir/data/PG_VERSION" ]; then
      as_user "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    fi
    ;;
  url)
    url
    ;;
  *)
    echo "usage: $0 start|stop|url DIR" >&2
    exit 64
    ;;
esac
