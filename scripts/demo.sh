#!/usr/bin/env bash
# The main job today: build one RoCEv2 packet of every opcode IBTA defines with softrdma's own
# packet builders, write them to a capture, and decode it with `softrdma dump --check`.
# Usage: scripts/demo.sh [FILE]   (default: build/every-opcode.pcap)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh >/dev/null
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release --target softrdma >/dev/null
file=${1:-build/every-opcode.pcap}
build/release/tools/softrdma/softrdma synth "$file"
build/release/tools/softrdma/softrdma dump --check "$file"
