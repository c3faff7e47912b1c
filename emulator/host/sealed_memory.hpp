// Shared memory that a client makes and the daemon maps (CQ rings, the work ring): a memfd
// sealed against shrinking, growing and further sealing, so that the daemon's mapping can never
// fault because the client cut the file under it (a store past the end would be SIGBUS).
#pragma once

#include <cstddef>
#include <string>

namespace softrdma::host {

// Client: a zero-filled sealed memfd of `bytes`, mapped read-write; the mapping, and the fd in
// `fd` (to pass to the daemon). Null with `error` (one line) on failure.
void* create_sealed_memory(const char* name, std::size_t bytes, int& fd, std::string& error);

// Daemon: maps `fd` if it carries the seals and is exactly `bytes` long; else null.
void* map_sealed_memory(int fd, std::size_t bytes);

}  // namespace softrdma::host
