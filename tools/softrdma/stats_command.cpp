#include "tools/softrdma/stats_command.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "emulator/host/runtime_dir.hpp"
#include "emulator/host/stats_endpoint.hpp"
#include "tools/softrdma/json_reader.hpp"
#include "tools/softrdma/stats_table.hpp"

namespace softrdma::stats {

namespace {

constexpr const char* kUsage =
    "usage: softrdma stats [--json] [--watch [SECONDS]] [--pid PID]\n"
    "\n"
    "Shows the counters of every running program that uses softrdma (each runs its own srdma0):\n"
    "pid, program, device and address; the device's counters, named as rxe's 'rdma statistic'\n"
    "hw counters (sent_pkts, rcvd_pkts, retransmitted_pkts, rcvd_seq_err, ...) and summed over\n"
    "every QP it had; the UDP socket's, capture and fault-injection counters; then one row per\n"
    "live QP with its type, state, peer QP and counters (the packet and byte counters always,\n"
    "the others when a QP has a non-zero one). A program run with --iwarp shows srdmaiw0 below\n"
    "it the same way, with its connection and stream counters as 'iwarp'.\n"
    "\n"
    "Options:\n"
    "  --json             one JSON object per process and line, the same object as\n"
    "                     SOFTRDMA_STATS_FILE / softrdma run --stats write at exit\n"
    "  --watch [SECONDS]  show again every SECONDS (default 1) until interrupted\n"
    "  --pid PID          only process PID\n"
    "  --help             this text\n"
    "\n"
    "Each such process answers on the Unix socket DIR/PID.sock, DIR being $SOFTRDMA_RUNTIME_DIR,\n"
    "else $XDG_RUNTIME_DIR/softrdma, else /tmp/softrdma-$UID (mode 0700; one owned by another\n"
    "user is refused). Sockets left by processes that are gone are removed.\n"
    "\n"
    "Exit status: 0 when counters were shown; 1 when no softrdma device is running (or not in\n"
    "process PID); 2 for a usage error or an unusable runtime directory.\n";

constexpr int kFetchTimeoutMs = 2000;

int fail(int status, const std::string& message) {
  std::fprintf(stderr, "softrdma stats: %s\n", message.c_str());
  return status;
}

struct Options {
  bool json = false;
  std::optional<double> watch;  // seconds between rounds
  std::optional<long> pid;
};

std::optional<double> seconds_of(const char* text) {
  char* end = nullptr;
  errno = 0;
  const double s = std::strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !(s >= 0.1) || s > 86400) return std::nullopt;
  return s;
}

std::optional<long> pid_of(const char* text) {
  char* end = nullptr;
  errno = 0;
  const long pid = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || pid <= 0) return std::nullopt;
  return pid;
}

enum class Round { shown, none, bad_directory };

// One look at every endpoint; prints what it finds.
Round show(const Options& o) {
  const host::RuntimeDir dir = host::inspect_runtime_dir();
  if (!dir.error.empty()) {
    fail(2, dir.error);
    return Round::bad_directory;
  }
  int shown = 0;
  for (const host::EndpointFile& e : dir.exists ? host::list_endpoints(dir.path) : std::vector<host::EndpointFile>{}) {
    if (o.pid && e.pid != *o.pid) continue;
    const host::Fetched f = host::fetch_stats(e.path, kFetchTimeoutMs);
    // Nobody listens: the process is gone. A process that is gone while the socket still
    // accepts (a forked child inherited the listening descriptor, and never answers) is stale
    // too; the pid alone is not trusted, since a live endpoint in another pid namespace answers.
    const bool gone =
        f.errnum == ECONNREFUSED || f.errnum == ENOENT || (f.errnum != 0 && ::kill(e.pid, 0) != 0 && errno == ESRCH);
    if (gone) {
      ::unlink(e.path.c_str());
      continue;
    }
    if (f.errnum != 0) {
      fail(1, "process " + std::to_string(e.pid) + ": cannot read its counters from " + e.path + ": " +
                  std::strerror(f.errnum));
      continue;
    }
    std::string error;
    const std::optional<JsonValue> report = parse_json(f.text, error);
    if (!report || report->kind != JsonValue::Kind::object) {
      fail(1, "process " + std::to_string(e.pid) + ": " + e.path + " answered something that is not a JSON object" +
                  (error.empty() ? "" : " (" + error + ")"));
      continue;
    }
    if (o.json) {
      std::string line = f.text;
      while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
      std::printf("%s\n", line.c_str());
    } else {
      std::printf("%s%s", shown > 0 ? "\n" : "", render_table(*report).c_str());
    }
    ++shown;
  }
  std::fflush(stdout);
  if (shown > 0) return Round::shown;
  if (o.pid) {
    fail(1, "process " + std::to_string(*o.pid) + " runs no softrdma device (looked in " + dir.path + ")");
  } else {
    fail(1, "no softrdma device is running (looked in " + dir.path + ")");
  }
  return Round::none;
}

// In --watch on a terminal the screen is redrawn; elsewhere each round starts with its time.
void round_header(double seconds, bool terminal) {
  const std::time_t now = std::time(nullptr);
  char clock[16];
  std::strftime(clock, sizeof clock, "%H:%M:%S", std::localtime(&now));
  if (terminal) std::printf("\x1b[H\x1b[2J");
  std::printf("softrdma stats, every %g s, at %s\n\n", seconds, clock);
}

}  // namespace

int stats_main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "--json") {
      o.json = true;
    } else if (a == "--watch") {
      o.watch = 1.0;
      if (i + 1 < argc && argv[i + 1][0] != '-') {
        o.watch = seconds_of(argv[++i]);
        if (!o.watch)
          return fail(2,
                      "--watch takes seconds from 0.1 to 86400 (e.g. --watch 2), not '" + std::string(argv[i]) + "'");
      }
    } else if (a == "--pid") {
      if (i + 1 >= argc) return fail(2, "--pid needs a process id (e.g. --pid 4242)");
      o.pid = pid_of(argv[++i]);
      if (!o.pid) return fail(2, "--pid needs a process id, not '" + std::string(argv[i]) + "'");
    } else {
      return fail(2, "unknown argument '" + std::string(a) + "' (see softrdma stats --help)");
    }
  }
  if (!o.watch) {
    switch (show(o)) {
      case Round::shown:
        return 0;
      case Round::none:
        return 1;
      case Round::bad_directory:
        return 2;
    }
  }
  const bool terminal = !o.json && ::isatty(STDOUT_FILENO);
  while (true) {
    if (!o.json) round_header(*o.watch, terminal);
    if (show(o) == Round::bad_directory) return 2;
    std::this_thread::sleep_for(std::chrono::duration<double>(*o.watch));
  }
}

}  // namespace softrdma::stats
