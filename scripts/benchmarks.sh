#!/usr/bin/env bash
# The micro-benchmarks (Benchmarks/IMBenchmarks, ordo-one/benchmark): the per-message paths, with
# their allocations counted. Allocation counts do not depend on the machine's load, so they are
# checked; times are shown only. BENCHMARKS.md ("Micro-benchmarks") explains the figures.
#
#   scripts/benchmarks.sh           runs them and checks the allocations against Benchmarks/Thresholds
#                                   (exit 1 when one grew)
#   scripts/benchmarks.sh update    runs them and keeps their allocation counts as the new thresholds
#   scripts/benchmarks.sh run       runs them and prints the table, checking nothing
set -euo pipefail
cd "$(dirname "$0")/.."
common=(--target IMBenchmarks --path Benchmarks/Thresholds --no-progress)
case "${1:-check}" in
  check)
    log="$(mktemp)"
    trap 'rm -f "$log"' EXIT
    set +e
    swift package --disable-sandbox benchmark thresholds check "${common[@]}" 2>&1 | tee "$log"
    status=${PIPESTATUS[0]}
    set -e
    # The plugin exits 1 both when a benchmark allocates more and when it allocates less than its
    # threshold; the error it names tells the two apart.
    if [ "$status" -eq 0 ]; then
      exit 0
    elif grep -q "benchmarkThresholdImprovement" "$log" && ! grep -q "benchmarkThresholdRegression" "$log"; then
      echo "The benchmarks allocate less than Benchmarks/Thresholds allows: run scripts/benchmarks.sh update to keep the gain."
      exit 0
    else
      echo "The benchmarks allocate more than Benchmarks/Thresholds allows, or did not run (exit $status): see the table above."
      exit 1
    fi ;;
  update)
    swift package --disable-sandbox --allow-writing-to-package-directory benchmark thresholds update "${common[@]}"
    # Only the allocation counts are kept: a time measured on a shared machine is no threshold.
    python3 - Benchmarks/Thresholds/*.json <<'PY'
import json, sys
for path in sys.argv[1:]:
    with open(path) as f:
        figures = json.load(f)
    with open(path, "w") as f:
        json.dump({"mallocCountTotal": figures["mallocCountTotal"]}, f, indent=2)
        f.write("\n")
PY
    ;;
  run)
    swift package --disable-sandbox benchmark --target IMBenchmarks --no-progress ;;
  *)
    echo "usage: scripts/benchmarks.sh [check|update|run]" >&2
    exit 2 ;;
esac
