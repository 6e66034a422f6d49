#!/usr/bin/env bash
# Installs the tools imserver uses to read, check and thumbnail media (libvips's command-line tools
# and ffmpeg, from Debian's packages) and prints the directory that holds them. imserver finds them
# on PATH or in the `mediaToolsDir` setting; without them uploads are stored unprocessed (no
# thumbnails, no first frames), see docs/MEDIA.md.
set -euo pipefail
if ! command -v vips >/dev/null || ! command -v vipsheader >/dev/null || ! command -v ffprobe >/dev/null || ! command -v ffmpeg >/dev/null; then
  packages="libvips-tools ffmpeg"
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $packages >&2
  else
    sudo apt-get update -qq >&2 && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $packages >&2
  fi
fi
dirname "$(command -v vips)"
