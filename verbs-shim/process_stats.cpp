#include "verbs-shim/process_stats.hpp"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "emulator/host/atomic_file.hpp"
#include "emulator/host/runtime_dir.hpp"
#include "emulator/host/stats_endpoint.hpp"
#include "verbs-shim/identity.hpp"

namespace softrdma::shim {

namespace {

struct ExitSnapshot {
  std::string path;  // absolute
  pid_t owner = 0;   // the process that armed it: a forked child does not write
  std::atomic<host::EmbeddedHost*> host{nullptr};
};

ExitSnapshot& exit_snapshot() {
  static ExitSnapshot* s = new ExitSnapshot;  // outlives static destructors, like the host
  return *s;
}

void write_exit_snapshot() {
  ExitSnapshot& s = exit_snapshot();
  host::EmbeddedHost* h = s.host.load();
  if (h == nullptr || s.owner != ::getpid()) return;
  const std::string error = host::write_file_atomically(s.path, host::to_json(process_report(*h)) + "\n");
  if (!error.empty()) std::fprintf(stderr, "softrdma: stats file %s: %s\n", s.path.c_str(), error.c_str());
}

host::StatsEndpoint* endpoint = nullptr;  // never freed, like the host it reports on
std::atomic<host::IwarpHost*> iwarp_host{nullptr};

void remove_endpoint() { endpoint->remove_file(); }

std::string absolute(const std::string& path) {
  if (path.starts_with('/')) return path;
  char cwd[4096];
  if (::getcwd(cwd, sizeof cwd) == nullptr) return path;
  return std::string(cwd) + "/" + path;
}

}  // namespace

host::StatsReport process_report(host::EmbeddedHost& h) {
  host::StatsReport r = host::report_of(h, program_invocation_short_name, kDeviceName);
  if (host::IwarpHost* iwarp = iwarp_host.load()) r.iwarp = host::iwarp_report_of(*iwarp, kIwarpDeviceName);
  return r;
}

void report_iwarp_host(host::IwarpHost* h) { iwarp_host.store(h); }

void arm_exit_snapshot() {
  const char* file = std::getenv(kStatsFileVariable);
  if (file == nullptr || *file == '\0') return;
  ExitSnapshot& s = exit_snapshot();
  s.path = absolute(file);
  s.owner = ::getpid();
  std::atexit(write_exit_snapshot);
}

void set_exit_snapshot_host(host::EmbeddedHost* h) { exit_snapshot().host.store(h); }

void serve_stats(host::EmbeddedHost& h) {
  const host::RuntimeDir dir = host::create_runtime_dir();
  std::string error = dir.error;
  if (error.empty()) {
    endpoint = host::StatsEndpoint::open(
                   dir.path, [&h] { return host::to_json(process_report(h)); }, error)
                   .release();
  }
  if (endpoint == nullptr) {
    std::fprintf(stderr, "softrdma: 'softrdma stats' cannot see this process: %s\n", error.c_str());
    return;
  }
  std::atexit(remove_endpoint);
}

}  // namespace softrdma::shim
