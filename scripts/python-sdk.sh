#!/usr/bin/env bash
# Installs RongCloud's official Python server SDK (`rongcloud` from PyPI) into a virtualenv that
# the integration tests drive imserver with, Prometheus's Python client, whose parser reads
# /metrics in the tests, and selenium, which drives the console in Chromium (scripts/chromium.sh).
# Prints the virtualenv's python.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.build/python-sdk
if ! "$venv/bin/python" -c "import rongcloud, requests, prometheus_client, selenium" 2>/dev/null; then
  if ! python3 -m venv --help >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq python3-venv; else sudo apt-get install -y python3-venv; fi
  fi
  rm -rf "$venv"
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check "rongcloud==2.0.1" "requests>=2,<3" "prometheus_client>=0.20,<1" "selenium>=4.20,<5" >&2
fi
echo "$PWD/$venv/bin/python"
