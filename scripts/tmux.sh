#!/usr/bin/env bash
# Installs tmux from Debian's packages: the imchat tests (Tests/IMKitTests) drive the terminal app
# in tmux sessions.
set -euo pipefail
if ! [ -x /usr/bin/tmux ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux >&2
  else
    sudo apt-get update -qq >&2 && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux >&2
  fi
fi
