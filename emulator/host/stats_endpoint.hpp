// A process's stats endpoint: the Unix stream socket <runtime dir>/<pid>.sock (runtime_dir.hpp)
// that `softrdma stats` reads. Connecting is the whole request: the endpoint writes one JSON
// object (stats_report.hpp) and a newline, and closes the connection. Only this user's
// processes are answered (SO_PEERCRED; the directory is 0700 too).
//
// One thread serves it, blocked in accept() between connections: no CPU while nobody asks.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace softrdma::host {

class StatsEndpoint {
 public:
  using Answer = std::function<std::string()>;  // the JSON object, without the newline

  // Binds <dir>/<pid>.sock (replacing a leftover of a dead process with this pid) and starts
  // the serving thread, with every signal blocked (they are the application's). Null, and
  // `error` set to one line, on failure.
  static std::unique_ptr<StatsEndpoint> open(const std::string& dir, Answer answer, std::string& error);

  StatsEndpoint(const StatsEndpoint&) = delete;
  StatsEndpoint& operator=(const StatsEndpoint&) = delete;
  ~StatsEndpoint();  // stops the thread, closes the socket and removes its file

  const std::string& path() const { return path_; }
  // Removes the socket file, in the process that opened it only (a forked child shares the
  // parent's endpoint and must leave it); for an exit handler, which cannot wait for the thread.
  void remove_file() const;

 private:
  StatsEndpoint(std::string path, int fd, Answer answer);
  void run();

  const std::string path_;
  const int fd_;
  const pid_t owner_;
  const Answer answer_;
  std::thread thread_;
};

// The endpoints in a runtime directory: files named <pid>.sock.
struct EndpointFile {
  pid_t pid = 0;
  std::string path;
};
std::vector<EndpointFile> list_endpoints(const std::string& dir);  // in pid order

// Reads an endpoint. `errnum` 0: `text` is its answer; ECONNREFUSED or ENOENT: no process
// serves that file any more (it is stale); otherwise the errno of what failed (ETIMEDOUT
// after `timeout_ms` without an answer).
struct Fetched {
  std::string text;
  int errnum = 0;
};
Fetched fetch_stats(const std::string& path, int timeout_ms);

}  // namespace softrdma::host
