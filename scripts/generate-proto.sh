#!/usr/bin/env bash
# Regenerates Sources/IMWire/im.pb.swift from Sources/IMWire/im.proto.
# Needs protoc (Debian: protobuf-compiler, installed here if missing) and builds the swift-protobuf
# plugin from the package's own dependency. The generated file is committed: a normal build never
# needs this script.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v protoc >/dev/null; then
  apt-get update -qq && apt-get install -y -qq protobuf-compiler
fi
swift build -c release --product protoc-gen-swift --scratch-path .build-protoc
plugin="$(swift build -c release --product protoc-gen-swift --scratch-path .build-protoc --show-bin-path)/protoc-gen-swift"
protoc --plugin=protoc-gen-swift="$plugin" --swift_out=Sources/IMWire --swift_opt=Visibility=Public \
  -I Sources/IMWire Sources/IMWire/im.proto
echo "generated Sources/IMWire/im.pb.swift"
