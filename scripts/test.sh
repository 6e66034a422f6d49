#!/usr/bin/env bash
# Builds everything (the imserver binary included: the crash-recovery test runs it as a child
# process), runs the whole test suite, then `imbench --quick`.
set -euo pipefail
cd "$(dirname "$0")/.."
# What the tests leave in the temporary directory (media fixtures made once per test process,
# servers' data directories, the private PostgreSQL server) goes into a folder of this run's,
# removed when it ends.
run_tmp="$(mktemp -d "${TMPDIR:-/tmp}/imserver-tests.XXXXXX")"
# Others may enter it: the PostgreSQL server below runs as its own user when this runs as root.
chmod 755 "$run_tmp"
export TMPDIR="$run_tmp"
trap 'rm -rf "$run_tmp"' EXIT
# GRDB links the system SQLite; Debian's headers are in libsqlite3-dev.
if ! [ -f /usr/include/sqlite3.h ]; then
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq libsqlite3-dev; else sudo apt-get install -y libsqlite3-dev; fi
fi
# The push provider tests pack client certificates as PKCS#12 with the openssl command.
if ! [ -x /usr/bin/openssl ]; then
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq openssl; else sudo apt-get install -y openssl; fi
fi
# RongCloud's official Python server SDK, which the compatibility tests drive imserver with.
IMSERVER_TEST_PYTHON="$(scripts/python-sdk.sh)"
export IMSERVER_TEST_PYTHON
# libvips's and ffmpeg's tools: the server checks uploads and makes thumbnails with them, the
# media tests make their fixtures with them.
scripts/media-tools.sh >/dev/null
# tmux, in which the tests drive imchat.
scripts/tmux.sh
# Headless Chromium and its WebDriver, for the console's browser test.
IMSERVER_TEST_CHROMEDRIVER="$(scripts/chromium.sh)"
export IMSERVER_TEST_CHROMEDRIVER
# A private PostgreSQL server (scripts/postgres.sh) for the PostgreSQL store's conformance suite
# and the cluster tests; stopped when this script ends.
pg_dir="${TMPDIR:-/tmp}/imserver-test-postgres-$$"
IMSERVER_TEST_POSTGRES_URL="$(scripts/postgres.sh start "$pg_dir")"
export IMSERVER_TEST_POSTGRES_URL
trap 'scripts/postgres.sh stop "$pg_dir"; rm -rf "$pg_dir" "$run_tmp"' EXIT
swift build --build-tests
# Every test target, the store conformance suite (Tests/StoreConformanceTests, docs/STORE-CONFORMANCE.md)
# included: it runs here against SQLite.
# The run's output is kept so that, when a test fails, its failures are printed again at the end,
# where a CI log's tail shows them.
test_log="$(mktemp)"
trap 'scripts/postgres.sh stop "$pg_dir"; rm -rf "$pg_dir" "$test_log" "$run_tmp"' EXIT
# At most 8 tests at a time. Each integration test runs servers, clients, tmux sessions or child
# processes of its own; all ~500 at once put a load of 10 on 2 cores, and then tests that bound
# a wait (a connect refused within 60 s, a reply within 10 s) failed for want of CPU, not for
# what they check. With 8 the run takes about 7 minutes here and the box stays near full.
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH:-8}"
set +e
# A run that hangs (a test waiting on something that never comes) fails after 30 minutes with the
# log so far, instead of holding CI until its own limit.
timeout --signal=TERM --kill-after=60 1800 swift test --skip-build "$@" 2>&1 | tee "$test_log"
status=${PIPESTATUS[0]}
set -e
if [ "$status" -eq 124 ]; then
  echo
  echo "== the test run did not end within 30 minutes and was stopped; the tests started and not ended =="
  awk '
    /^◇ Test case / || /^◇ Test run started/ { next }
    /^◇ Test .* started\.$/ { name = $0; sub(/^◇ Test /, "", name); sub(/ started\.$/, "", name); open[name]++ }
    /^(✔|✘) Test .* (passed|failed) after/ {
      name = $0; sub(/^(✔|✘) Test /, "", name); sub(/( with [0-9]+ test cases?)? (passed|failed) after.*$/, "", name); open[name]--
    }
    END { for (name in open) if (open[name] > 0) print name }
  ' "$test_log"
fi
if [ "$status" -ne 0 ]; then
  echo
  echo "== the tests failed (exit $status); what failed, from the log above =="
  # Each failure with the lines that explain it (an issue's comments follow it, as "↳" lines).
  awk '
    /^(◇|✔|✘)|^[0-9]{4}-[0-9]{2}-[0-9]{2}T/ { detail = 0 }
    detail > 0 && detail <= 40 { print; detail++; next }
    /✘|recorded an issue|error: |Fatal error|Expectation failed|signal [0-9]+|Exited with/ && !/^✔/ {
      print; if (/recorded an issue/) detail = 1
    }
  ' "$test_log" | head -200
  exit "$status"
fi
# Smoke check: every imbench scenario, small, end to end (counts are checked, timings are not).
bin="$(swift build --show-bin-path)"
"$bin/imbench" --quick --output "$bin/imbench-quick.json"
# The micro-benchmarks (a release build): allocations per operation must not grow past
# Benchmarks/Thresholds.
scripts/benchmarks.sh
