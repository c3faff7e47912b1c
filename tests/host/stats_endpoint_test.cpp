// The pieces behind `softrdma stats` and SOFTRDMA_STATS_FILE that live in emulator/host/: the
// runtime directory's choice and checks, the stats endpoint (answers, stale files, removal)
// and the atomic file writer.
#include "emulator/host/stats_endpoint.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

#include "emulator/host/atomic_file.hpp"
#include "emulator/host/runtime_dir.hpp"

namespace {

namespace fs = std::filesystem;
namespace host = softrdma::host;

// A fresh folder, removed with everything in it.
struct TempDir {
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "softrdma-stats-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~TempDir() { fs::remove_all(path); }
  std::string path;
};

// Sets (or unsets, with null) an environment variable for one scope.
struct ScopedEnv {
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value != nullptr ? ::setenv(name, value, 1) : ::unsetenv(name);
  }
  ~ScopedEnv() { old_ ? ::setenv(name_, old_->c_str(), 1) : ::unsetenv(name_); }
  const char* name_;
  std::optional<std::string> old_;
};

// A Unix stream socket bound to `path` (and not listening).
int bound_socket(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  return fd;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

TEST_CASE("runtime dir: SOFTRDMA_RUNTIME_DIR, else XDG_RUNTIME_DIR/softrdma, else /tmp/softrdma-UID", "[stats]") {
  {
    ScopedEnv ours("SOFTRDMA_RUNTIME_DIR", "/a/b"), xdg("XDG_RUNTIME_DIR", "/run/user/7");
    CHECK(host::runtime_dir_path() == "/a/b");
  }
  {
    ScopedEnv ours("SOFTRDMA_RUNTIME_DIR", ""), xdg("XDG_RUNTIME_DIR", "/run/user/7");  // empty counts as unset
    CHECK(host::runtime_dir_path() == "/run/user/7/softrdma");
  }
  {
    ScopedEnv ours("SOFTRDMA_RUNTIME_DIR", nullptr), xdg("XDG_RUNTIME_DIR", nullptr);
    CHECK(host::runtime_dir_path() == "/tmp/softrdma-" + std::to_string(::geteuid()));
  }
}

TEST_CASE("runtime dir: absent is no error, created 0700, a file or a link is refused", "[stats]") {
  TempDir t;
  const std::string dir = t.path + "/run";
  ScopedEnv env("SOFTRDMA_RUNTIME_DIR", dir.c_str());

  host::RuntimeDir seen = host::inspect_runtime_dir();
  CHECK(seen.path == dir);
  CHECK_FALSE(seen.exists);
  CHECK(seen.error.empty());
  CHECK_FALSE(fs::exists(dir));  // inspecting creates nothing

  const host::RuntimeDir made = host::create_runtime_dir();
  CHECK(made.exists);
  CHECK(made.error.empty());
  struct stat st {};
  REQUIRE(::stat(dir.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0700);
  CHECK(host::create_runtime_dir().exists);  // again: it is there already
  CHECK(host::inspect_runtime_dir().exists);

  const std::string file = t.path + "/file";
  std::ofstream(file) << "x";
  ScopedEnv to_file("SOFTRDMA_RUNTIME_DIR", file.c_str());
  seen = host::create_runtime_dir();
  CHECK_FALSE(seen.exists);
  CHECK_THAT(seen.error, Catch::Contains("is not a directory"));

  const std::string link = t.path + "/link";
  fs::create_directory_symlink(dir, link);
  ScopedEnv to_link("SOFTRDMA_RUNTIME_DIR", link.c_str());
  seen = host::inspect_runtime_dir();
  CHECK_FALSE(seen.exists);
  CHECK_THAT(seen.error, Catch::Contains("is not a directory"));

  ScopedEnv no_parent("SOFTRDMA_RUNTIME_DIR", (t.path + "/none/run").c_str());
  seen = host::create_runtime_dir();
  CHECK_FALSE(seen.exists);
  CHECK_THAT(seen.error, Catch::Contains("cannot create the runtime directory"));
}

TEST_CASE("stats endpoint: every connection gets a fresh answer, and closing removes the file", "[stats]") {
  TempDir t;
  std::atomic<int> asked{0};
  std::string error;
  auto endpoint = host::StatsEndpoint::open(
      t.path, [&] { return "{\"n\":" + std::to_string(++asked) + "}"; }, error);
  REQUIRE(endpoint);
  CHECK(error.empty());
  CHECK(endpoint->path() == t.path + "/" + std::to_string(::getpid()) + ".sock");
  struct stat st {};
  REQUIRE(::stat(endpoint->path().c_str(), &st) == 0);
  CHECK(S_ISSOCK(st.st_mode));
  CHECK((st.st_mode & 0777) == 0600);

  host::Fetched f = host::fetch_stats(endpoint->path(), 2000);
  CHECK(f.errnum == 0);
  CHECK(f.text == "{\"n\":1}\n");
  f = host::fetch_stats(endpoint->path(), 2000);
  CHECK(f.text == "{\"n\":2}\n");

  const std::string path = endpoint->path();
  endpoint.reset();
  CHECK_FALSE(fs::exists(path));
  CHECK(host::fetch_stats(path, 2000).errnum == ENOENT);
}

TEST_CASE("stats endpoint: a reader removing refused sockets never takes one being opened", "[stats]") {
  // `softrdma stats` removes a listed socket that refuses it (a dead process's). A socket
  // listed between its bind() and listen() would refuse it too: the open must not list it
  // before it listens (the daemon once lost its endpoint this way).
  TempDir t;
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done.load()) {
      for (const host::EndpointFile& e : host::list_endpoints(t.path))
        if (host::fetch_stats(e.path, 2000).errnum == ECONNREFUSED) ::unlink(e.path.c_str());
    }
  });
  int opened = 0;
  std::string error;
  for (int i = 0; i < 2000 && error.empty(); ++i) {
    if (host::StatsEndpoint::open(
            t.path, [] { return std::string("{}"); }, error))
      ++opened;
  }
  done.store(true);
  reader.join();
  INFO(error);
  CHECK(opened == 2000);
}

TEST_CASE("stats endpoint: a socket nobody serves reads as stale (ECONNREFUSED)", "[stats]") {
  TempDir t;
  const std::string path = t.path + "/999999.sock";
  ::close(bound_socket(path));  // as a killed process leaves it: the file stays, nobody listens
  CHECK(fs::exists(path));
  CHECK(host::fetch_stats(path, 2000).errnum == ECONNREFUSED);
}

TEST_CASE("stats endpoint: a listener that never answers times out", "[stats]") {
  TempDir t;
  const std::string path = t.path + "/1.sock";
  const int fd = bound_socket(path);
  REQUIRE(::listen(fd, 1) == 0);  // the kernel completes the connection; nobody writes
  CHECK(host::fetch_stats(path, 100).errnum == ETIMEDOUT);
  ::close(fd);
}

TEST_CASE("stats endpoint: only PID.sock files are listed, in pid order", "[stats]") {
  TempDir t;
  for (const char* name : {"300.sock", "20.sock", "x.sock", "12a.sock", ".sock", "7.sock.tmp", "notes.txt"})
    std::ofstream(t.path + "/" + name) << "";
  const std::vector<host::EndpointFile> found = host::list_endpoints(t.path);
  REQUIRE(found.size() == 2);
  CHECK(found[0].pid == 20);
  CHECK(found[0].path == t.path + "/20.sock");
  CHECK(found[1].pid == 300);
  CHECK(host::list_endpoints(t.path + "/absent").empty());
}

TEST_CASE("stats endpoint: a directory too deep for a Unix socket name is one clear error", "[stats]") {
  std::string error;
  auto endpoint = host::StatsEndpoint::open(
      "/tmp/" + std::string(120, 'd'), [] { return std::string("{}"); }, error);
  CHECK_FALSE(endpoint);
  CHECK_THAT(error, Catch::Contains("longer than a Unix socket allows"));
}

TEST_CASE("atomic file: written whole, replacing the old one, and a failure leaves no temporary", "[stats]") {
  TempDir t;
  const std::string path = t.path + "/stats.json";
  std::ofstream(path) << "old";
  CHECK(host::write_file_atomically(path, "{\"a\":1}\n").empty());
  CHECK(read_file(path) == "{\"a\":1}\n");
  CHECK(std::distance(fs::directory_iterator(t.path), fs::directory_iterator{}) == 1);  // no temporary left

  // The target is a directory: the rename fails, the temporary is removed.
  const std::string dir = t.path + "/a-dir";
  fs::create_directory(dir);
  fs::create_directory(dir + "/inside");  // rename() cannot replace a non-empty directory
  const std::string error = host::write_file_atomically(dir, "x");
  CHECK_THAT(error, Catch::Contains("cannot rename"));
  CHECK(std::distance(fs::directory_iterator(t.path), fs::directory_iterator{}) == 2);

  CHECK_THAT(host::write_file_atomically(t.path + "/none/x.json", "x"), Catch::Contains("cannot create"));
}
