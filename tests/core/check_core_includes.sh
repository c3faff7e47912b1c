#!/bin/sh
# emulator/core must stay sans-I/O (DESIGN.md §1): it may include wire/, its own headers and
# the C++ standard library, and nothing that does I/O, keeps time or runs threads.
dir=${1:?usage: check_core_includes.sh EMULATOR_CORE_DIR}
bad=$(grep -nE '#include *[<"](boost/|asio|rte_|pcap|thread|chrono|ctime|time\.h|mutex|condition_variable|future|sys/|netinet|arpa/|unistd|fcntl|infiniband/|emulator/(net|host)/)' "$dir"/*.hpp "$dir"/*.cpp)
if [ -n "$bad" ]; then
  echo "emulator/core includes what a sans-I/O core must not:"
  echo "$bad"
  exit 1
fi
echo "emulator/core includes only wire/, its own headers and the standard library"
