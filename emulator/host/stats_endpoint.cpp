#include "emulator/host/stats_endpoint.hpp"

#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <system_error>

namespace softrdma::host {

namespace {

constexpr std::string_view kSuffix = ".sock";

std::optional<sockaddr_un> address_of(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path) return std::nullopt;
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return a;
}

// Writes all of `text`; false when the peer went away or stopped reading (SO_SNDTIMEO).
bool send_all(int fd, const std::string& text) {
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = ::send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

bool same_user(int fd) {
  ucred cred{};
  socklen_t len = sizeof cred;
  return ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.uid == ::geteuid();
}

}  // namespace

std::unique_ptr<StatsEndpoint> StatsEndpoint::open(const std::string& dir, Answer answer, std::string& error) {
  const std::string path = dir + "/" + std::to_string(::getpid()) + std::string(kSuffix);
  // Bound and listening under a name no reader lists, then renamed into place: a `softrdma
  // stats` that connected between bind() and listen() would be refused and remove the file
  // as a dead process's. The rename also replaces a dead process's with the same pid.
  const std::string unlisted = path + ".new";
  const std::optional<sockaddr_un> address = address_of(unlisted);
  if (!address) {
    error = "the stats endpoint path " + unlisted + " is longer than a Unix socket allows (" +
            std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes)";
    return nullptr;
  }
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error = std::string("cannot make the stats endpoint's socket: ") + std::strerror(errno);
    return nullptr;
  }
  ::unlink(unlisted.c_str());  // left by a process with the same pid that died here
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&*address), sizeof *address) != 0 ||
      ::chmod(unlisted.c_str(), 0600) != 0 || ::listen(fd, 16) != 0 || ::rename(unlisted.c_str(), path.c_str()) != 0) {
    error = "cannot serve stats on " + path + ": " + std::strerror(errno);
    ::close(fd);
    ::unlink(unlisted.c_str());
    return nullptr;
  }
  std::unique_ptr<StatsEndpoint> endpoint(new StatsEndpoint(path, fd, std::move(answer)));
  // The thread inherits the mask it is created with: block everything for it, then restore.
  sigset_t all, old;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  try {
    endpoint->thread_ = std::thread([e = endpoint.get()] { e->run(); });
  } catch (const std::system_error& e) {
    error = std::string("cannot start the stats endpoint's thread: ") + e.what();
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (!error.empty()) return nullptr;  // the destructor closes and removes the socket
  return endpoint;
}

StatsEndpoint::StatsEndpoint(std::string path, int fd, Answer answer)
    : path_(std::move(path)), fd_(fd), owner_(::getpid()), answer_(std::move(answer)) {}

StatsEndpoint::~StatsEndpoint() {
  ::shutdown(fd_, SHUT_RDWR);  // wakes accept() with EINVAL
  if (thread_.joinable()) thread_.join();
  ::close(fd_);
  remove_file();
}

void StatsEndpoint::remove_file() const {
  if (::getpid() == owner_) ::unlink(path_.c_str());
}

void StatsEndpoint::run() {
  ::pthread_setname_np(::pthread_self(), "softrdma-stats");  // what top -H and /proc show
  while (true) {
    const int client = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      // Out of descriptors or memory: try again later rather than spin.
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      return;  // EINVAL: shut down by the destructor
    }
    if (same_user(client)) {
      // A reader that stops reading must not hold the endpoint for long.
      const timeval limit{1, 0};
      ::setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
      send_all(client, answer_() + "\n");
    }
    ::close(client);
  }
}

std::vector<EndpointFile> list_endpoints(const std::string& dir) {
  std::vector<EndpointFile> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    if (!name.ends_with(kSuffix) || name.size() == kSuffix.size()) continue;
    const std::string_view digits = name.substr(0, name.size() - kSuffix.size());
    if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) || digits.size() > 9) {
      continue;
    }
    out.push_back({static_cast<pid_t>(std::stol(std::string(digits))), dir + "/" + std::string(name)});
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(), [](const EndpointFile& a, const EndpointFile& b) { return a.pid < b.pid; });
  return out;
}

Fetched fetch_stats(const std::string& path, int timeout_ms) {
  Fetched f;
  const std::optional<sockaddr_un> address = address_of(path);
  if (!address) {
    f.errnum = ENAMETOOLONG;
    return f;
  }
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    f.errnum = errno;
    return f;
  }
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&*address), sizeof *address) != 0) {
    f.errnum = errno;
    ::close(fd);
    return f;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[16384];
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    const int ready = left.count() > 0 ? ::poll(&p, 1, static_cast<int>(left.count())) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      f.errnum = ready == 0 ? ETIMEDOUT : errno;
      break;
    }
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) f.errnum = errno;
    if (n <= 0) break;
    f.text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return f;
}

}  // namespace softrdma::host
