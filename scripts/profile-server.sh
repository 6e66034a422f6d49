#!/usr/bin/env bash
# Profiles imserver on a hot path while imbench drives it: the release server runs as its own
# process, imbench sets up users and connections, and once the load starts `perf record` samples the
# server for PROFILE_SECONDS (default 15) with call graphs.
#
#   scripts/profile-server.sh private --pairs 2500 --rate 4000 --warmup 3 --duration 20
#   scripts/profile-server.sh connections --connections 19000 --duration 30
#   PROFILE_DATA_DIR=/tmp/imbench-10m scripts/profile-server.sh history --writer-pairs 0
#   PROFILE_SERVER_ARGS="--client-sends-per-second 1000000" scripts/profile-server.sh connect-storm --workers 2
#     (the storm's mailers need the raised per-client limit that imbench gives the servers it starts)
#
# Arguments: an imbench scenario and its options (without --url). Needs a release build
# (swift build -c release) and Debian's linux-perf. On this machine kind perf has no hardware
# counters (`perf stat -e instructions true` says "not supported") and valgrind 3.19 crashes on any
# Swift program with an async main, so the profile samples the software cpu-clock event (timer based:
# where CPU time goes, not instruction counts). Writes .build/profile/<scenario>.perf.data and
# prints the hottest functions by self and by inclusive time, demangled.
set -euo pipefail
cd "$(dirname "$0")/.."
scenario="$1"; shift
bin=.build/release
out=.build/profile
seconds="${PROFILE_SECONDS:-15}"
mkdir -p "$out"
# PROFILE_DATA_DIR: a data directory to use and keep (e.g. one seeded by `imbench seed` for history).
data="${PROFILE_DATA_DIR:-$(mktemp -d /tmp/imbench-profile-XXXXXX)}"
keep="${PROFILE_DATA_DIR:+yes}"
log="$data/imserver.log"
: >"$log"
IMSERVER_API_CALLS_PER_SECOND=0 IMSERVER_MAX_CONNECTIONS_PER_ADDRESS=0 "$bin/imserver" serve --host 127.0.0.1 --port 0 --data-dir "$data" \
  --app-key imbench --app-secret imbench-secret --log-level warning ${PROFILE_SERVER_ARGS:-} >"$log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true; [ -n "$keep" ] || rm -rf "$data"' EXIT
for _ in $(seq 1 600); do
  grep -q "imserver listening on" "$log" && break
  kill -0 $server 2>/dev/null || { cat "$log"; exit 1; }
  sleep 0.1
done
port="$(sed -n 's/^imserver listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$log")"
perfdata="$out/$scenario.perf.data"
rm -f "$perfdata"
"$bin/imbench" "$scenario" --url "http://127.0.0.1:$port" --server-pid "$server" \
  --output "$out/$scenario-profiled.json" "$@" 2>&1 | while IFS= read -r line; do
    echo "$line"
    case "$line" in
      *"connected ("*|*"ready,"*|*"clients connecting"*)
        perf record -e cpu-clock -F 999 -g -p "$server" -o "$perfdata" -- sleep "$seconds" >/dev/null 2>&1 ;;
    esac
  done
kill "$server" 2>/dev/null || true
report() {
  perf report -i "$perfdata" --stdio --no-demangle "$@" 2>/dev/null | grep -E '^ +[0-9]' | head -45 \
    | swift demangle --simplified | cut -c1-200
}
echo; echo "== self time (functions where the samples landed)"; report --no-children --sort symbol -g none
echo; echo "== inclusive time (functions and everything they call)"; report --children --sort symbol -g none
echo "profile: $perfdata (perf report -i $perfdata)"
