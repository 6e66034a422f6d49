#!/usr/bin/env bash
# Installs headless Chromium and its WebDriver from Debian's packages, for the console's browser
# test (Tests/IntegrationTests/python/console_browser.py, driven by selenium from PyPI, which
# scripts/python-sdk.sh installs). Prints the driver's path.
set -euo pipefail
if ! [ -x /usr/bin/chromedriver ] || ! [ -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >&2
  else
    sudo apt-get update -qq >&2 && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >&2
  fi
fi
echo /usr/bin/chromedriver
