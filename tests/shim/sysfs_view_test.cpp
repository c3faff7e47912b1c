// The sysfs view of `softrdma run`: the path mapping of libsoftrdma_sysfs.so (its source is
// compiled into this executable, so sanitizer builds check it), srdma0's files and their
// agreement with the verbs, and the tree softrdma run writes.
#include "tools/softrdma/sysfs_view.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "tools/softrdma/sysfs_tree.hpp"
#include "verbs-shim/attributes.hpp"
#include "verbs-shim/sysfs_files.hpp"
#include "verbs-shim/sysfs_view/view_path.h"

using namespace softrdma;
using namespace softrdma::shim;

namespace {

// Sets a variable for one test case, and puts the old value back.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedVariable() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedVariable(const ScopedVariable&) = delete;
  ScopedVariable& operator=(const ScopedVariable&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// softrdma_view_path into a heap buffer of exactly PATH_MAX bytes, where ASan sees any
// overrun; "=" when the path came back unchanged (the same pointer), "!ERRNO" for an error.
std::string view(const std::string& path) {
  std::vector<char> out(PATH_MAX);
  errno = 0;
  const char* p = softrdma_view_path(path.c_str(), out.data());
  if (p == path.c_str()) return "=";
  if (p == nullptr) return "!" + std::to_string(errno);
  REQUIRE(p == out.data());
  return p;
}

const SysfsFile* find(const std::vector<SysfsFile>& files, const std::string& path) {
  for (const SysfsFile& f : files) {
    if (f.path == path) return &f;
  }
  return nullptr;
}

std::string content(const std::vector<SysfsFile>& files, const std::string& path) {
  const SysfsFile* f = find(files, path);
  return f != nullptr ? f->content : "(absent)";
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("sysfs view: paths outside the view pass through unchanged", "[sysfs-view]") {
  ScopedVariable root(SOFTRDMA_SYSFS_ROOT_VARIABLE, "/R");
  for (const char* path :
       {"/sys/class/net/lo", "/sys/class/infinibandx", "/sys/class/infiniband_mad/umad0", "/sys/classes/infiniband",
        "/sysx/class/infiniband", "/proc/self/maps", "/", "", "sys/class/infiniband/srdma0", "./sys/class/infiniband",
        "/sys/class", "/sys", "/dev", "/dev/null", "/dev/infinibandx", "/dev/shm/infiniband", "/sys/dev/infiniband",
        "dev/infiniband"}) {
    CAPTURE(path);
    CHECK(view(path) == "=");
  }
  CHECK(softrdma_view_path(nullptr, nullptr) == nullptr);
}

TEST_CASE("sysfs view: without the variable nothing is redirected", "[sysfs-view]") {
  for (const char* value : {static_cast<const char*>(nullptr), ""}) {
    ScopedVariable root(SOFTRDMA_SYSFS_ROOT_VARIABLE, value);
    CHECK(view("/sys/class/infiniband/srdma0/node_type") == "=");
  }
}

TEST_CASE("sysfs view: /dev/infiniband moves under the root's dev, normalised", "[sysfs-view]") {
  ScopedVariable root(SOFTRDMA_SYSFS_ROOT_VARIABLE, "/R");
  CHECK(view("/dev/infiniband") == "/R/dev/infiniband");
  CHECK(view("//dev//infiniband/./uverbs_srdma0") == "/R/dev/infiniband/uverbs_srdma0");
  CHECK(view("/dev/infiniband/..") == "=");
}

TEST_CASE("sysfs view: the two classes move under the root, normalised", "[sysfs-view]") {
  ScopedVariable root(SOFTRDMA_SYSFS_ROOT_VARIABLE, "/R");
  CHECK(view("/sys/class/infiniband") == "/R/class/infiniband");
  CHECK(view("/sys/class/infiniband/") == "/R/class/infiniband");
  CHECK(view("/sys/class/infiniband/srdma0/device/net/") == "/R/class/infiniband/srdma0/device/net/");
  CHECK(view("//sys///class//infiniband//srdma0///ports/1//state") == "/R/class/infiniband/srdma0/ports/1/state");
  CHECK(view("/sys/class/infiniband_verbs/uverbs0/ibdev") == "/R/class/infiniband_verbs/uverbs0/ibdev");
  CHECK(view("/sys/class/infiniband/srdma0/./device/../ports") == "/R/class/infiniband/srdma0/ports");
  CHECK(view("/sys/class/infiniband/srdma0/.") == "/R/class/infiniband/srdma0/");
  CHECK(view("/sys/class/infiniband/srdma0/ports/..") == "/R/class/infiniband/srdma0/");
  // A ".." that climbs out of the view leaves the path to the real file system, as it is.
  CHECK(view("/sys/class/infiniband/..") == "=");
  CHECK(view("/sys/class/infiniband/srdma0/../../net/lo") == "=");
}

TEST_CASE("sysfs view: long paths fail with ENAMETOOLONG and never overrun", "[sysfs-view]") {
  const std::string prefix = "/sys/class/infiniband/";
  const std::string too_long = "!" + std::to_string(ENAMETOOLONG);
  ScopedVariable root(SOFTRDMA_SYSFS_ROOT_VARIABLE, "/R");
  // The mapped path with its terminator fills PATH_MAX exactly: it fits; one byte more does not.
  const std::string fits = prefix + std::string(PATH_MAX - 1 - std::strlen("/R/class/infiniband/"), 'a');
  CHECK(view(fits).size() == PATH_MAX - 1);
  CHECK(view(fits + "b") == too_long);
  CHECK(view(fits + "/") == too_long);  // the kept trailing slash counts too
  CHECK(view(prefix + std::string(4 * PATH_MAX, 'a')) == too_long);
  CHECK(view(prefix + std::string(PATH_MAX, '/')) == "/R/class/infiniband");
  // Only what is left after "." and ".." counts.
  std::string climbing = prefix;
  for (int i = 0; i < 2 * PATH_MAX; ++i) climbing += "x/../";
  CHECK(view(climbing + "srdma0") == "/R/class/infiniband/srdma0");
  CHECK(view(std::string(4 * PATH_MAX, '/') + "tmp") == "=");  // outside: the kernel's to judge
  ScopedVariable long_root(SOFTRDMA_SYSFS_ROOT_VARIABLE, std::string(PATH_MAX, 'r').c_str());
  CHECK(view(prefix + "srdma0") == too_long);
}

TEST_CASE("sysfs files: what is known, and only that", "[sysfs-view]") {
  const std::vector<SysfsFile> unknown = sysfs_files({});
  CHECK(content(unknown, "node_type") == "1: CA\n");
  CHECK(content(unknown, "node_desc") == "softrdma srdma0\n");
  CHECK(content(unknown, "fw_ver") == std::string(kFirmwareVersion) + "\n");
  CHECK(content(unknown, "board_id") == "SOFTRDMA\n");
  CHECK(content(unknown, "device/numa_node") == "-1\n");
  CHECK(content(unknown, "ports/1/gid_attrs/types/0") == "RoCE v2\n");
  // An embedded device's address is chosen when it starts: no GUID or GID before then.
  for (const char* absent : {"node_guid", "sys_image_guid", "ports/1/gids/0", "ports/1/gid_attrs/ndevs/0"}) {
    CAPTURE(absent);
    CHECK(find(unknown, absent) == nullptr);
  }

  const std::vector<SysfsFile> known = sysfs_files({IpAddress::v4(127, 77, 50, 1), "lo"});
  CHECK(content(known, "node_guid") == "0200:7fff:fe4d:3201\n");
  CHECK(content(known, "sys_image_guid") == "0200:7fff:fe4d:3201\n");
  CHECK(content(known, "ports/1/gids/0") == "0000:0000:0000:0000:0000:ffff:7f4d:3201\n");
  CHECK(content(known, "ports/1/gids/1") == "0000:0000:0000:0000:0000:0000:0000:0000\n");
  CHECK(find(known, "ports/1/gids/" + std::to_string(kGidTableLength - 1)) != nullptr);
  CHECK(find(known, "ports/1/gids/" + std::to_string(kGidTableLength)) == nullptr);
  CHECK(content(known, "ports/1/gid_attrs/ndevs/0") == "lo\n");
  CHECK(content(known, "device/net/lo/").empty());

  const std::vector<SysfsFile> v6 = sysfs_files({parse_address("fd53:7264:6d61::1"), {}});
  CHECK(content(v6, "ports/1/gids/0") == "fd53:7264:6d61:0000:0000:0000:0000:0001\n");
}

TEST_CASE("sysfs files: srdmaiw0's, as the kernel writes them for siw", "[sysfs-view]") {
  const std::vector<SysfsFile> files = sysfs_files({IpAddress::v4(127, 77, 50, 1), "lo", Transport::iwarp});
  CHECK(content(files, "node_type") == "4: RNIC\n");
  CHECK(content(files, "node_desc") == "softrdma srdmaiw0\n");
  CHECK(content(files, "node_guid") == "0600:7fff:fe4d:3201\n");  // the EUI-64 of MAC 06:00:7f:4d:32:01
  CHECK(content(files, "ports/1/gids/0") == "0600:7f4d:3201:0000:0000:0000:0000:0000\n");  // the MAC, zero-padded
  CHECK(find(files, "ports/1/gids/1") == nullptr);                                         // a table of one
  CHECK(content(files, "ports/1/gid_attrs/types/0") == "IB/RoCE v1\n");
  CHECK(content(files, "ports/1/gid_attrs/ndevs/0") == "lo\n");
  CHECK(content(files, "device/net/lo/").empty());
}

TEST_CASE("sysfs files: the port files say what ibv_query_port says", "[sysfs-view]") {
  const DeviceIdentity id = make_identity(kDefaultAddress, std::nullopt);
  const ibv_port_attr p = port_attr(id);
  const std::vector<SysfsFile> files = sysfs_files({kDefaultAddress, "lo"});
  CHECK(content(files, "ports/1/state").starts_with(std::to_string(p.state) + ": "));
  CHECK(content(files, "ports/1/phys_state").starts_with(std::to_string(p.phys_state) + ": "));
  CHECK(p.link_layer == IBV_LINK_LAYER_ETHERNET);
  CHECK(content(files, "ports/1/link_layer") == "Ethernet\n");
}

TEST_CASE("sysfs files: ibv_read_sysfs_file answers with the same files", "[sysfs-view]") {
  ScopedVariable ip("SOFTRDMA_IP", nullptr);  // the first free 127.0.0.N, on loopback
  ScopedVariable netdev("SOFTRDMA_NETDEV", nullptr);
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  REQUIRE(n == 1);
  ibv_context* ctx = ibv_open_device(list[0]);
  REQUIRE(ctx != nullptr);
  IpAddress address;  // GID 0 is the bound address in IPv6 form
  REQUIRE(ibv_query_gid(ctx, kPortNum, 0, reinterpret_cast<ibv_gid*>(address.bytes.data())) == 0);
  ibv_close_device(ctx);
  for (const SysfsFile& f : sysfs_files({address, "lo"})) {
    if (f.path.ends_with('/')) continue;
    CAPTURE(f.path);
    char buf[128];
    REQUIRE(ibv_read_sysfs_file(list[0]->ibdev_path, f.path.c_str(), buf, sizeof buf) >= 0);
    CHECK(std::string(buf) + "\n" == f.content);
  }
  ibv_free_device_list(list);
}

// A runtime directory of the test's own, WORK/run, removed with WORK at the end.
struct TemporaryRuntimeDir {
  std::filesystem::path work = make_work();
  ScopedVariable variable{"SOFTRDMA_RUNTIME_DIR", (work / "run").c_str()};
  ~TemporaryRuntimeDir() {
    std::error_code ec;
    std::filesystem::remove_all(work, ec);
  }
  static std::filesystem::path make_work() {
    char dir_template[] = "/tmp/softrdma-sysfs-test-XXXXXX";
    REQUIRE(::mkdtemp(dir_template) != nullptr);
    return dir_template;
  }
};

TEST_CASE("sysfs tree: written once per content, checked when found", "[sysfs-view]") {
  namespace fs = std::filesystem;
  const TemporaryRuntimeDir dir;
  const fs::path& work = dir.work;

  const std::vector<SysfsFile> files = sysfs_files({IpAddress::v4(127, 77, 50, 1), "lo"});
  const run::SysfsTree tree = run::write_sysfs_tree(files);
  REQUIRE(tree.error.empty());
  const fs::path device = fs::path(tree.root) / "class/infiniband/srdma0";
  CHECK(read_file(device / "ports/1/gid_attrs/ndevs/0") == "lo\n");
  CHECK(read_file(device / "node_guid") == "0200:7fff:fe4d:3201\n");
  CHECK(fs::is_directory(device / "device/net/lo"));
  const fs::path node = fs::path(tree.root) / "dev/infiniband/uverbs_srdma0";
  CHECK(fs::read_symlink(node) == "/dev/null");
  CHECK(fs::is_character_file(node));
  CHECK(run::write_sysfs_tree(files).root == tree.root);  // the same content: the same tree
  const run::SysfsTree other = run::write_sysfs_tree(sysfs_files({}));
  CHECK(other.root != tree.root);
  CHECK(!fs::exists(fs::path(other.root) / "class/infiniband/srdma0/node_guid"));

  // srdmaiw0 beside srdma0: another tree, with both devices.
  const run::SysfsTree both =
      run::write_sysfs_tree(files, sysfs_files({IpAddress::v4(127, 77, 50, 1), "lo", Transport::iwarp}));
  REQUIRE(both.error.empty());
  CHECK(both.root != tree.root);
  CHECK(read_file(fs::path(both.root) / "class/infiniband/srdmaiw0/node_type") == "4: RNIC\n");
  CHECK(read_file(fs::path(both.root) / "class/infiniband/srdma0/node_type") == "1: CA\n");
  CHECK(!fs::exists(device.parent_path() / "srdmaiw0"));

  // A tree that lost a file (to /tmp's cleaning, say) is written again.
  fs::remove(device / "ports/1/gid_attrs/types/0");
  CHECK(run::write_sysfs_tree(files).root == tree.root);
  CHECK(read_file(device / "ports/1/gid_attrs/types/0") == "RoCE v2\n");
  fs::remove(node);  // and one that lost its device node
  CHECK(run::write_sysfs_tree(files).root == tree.root);
  CHECK(fs::is_character_file(node));
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(work / "run")) ++entries;
  CHECK(entries == 3);  // the three trees, no temporary left over
}

TEST_CASE("sysfs tree: one that no process holds is removed by the next run", "[sysfs-view]") {
  namespace fs = std::filesystem;
  const TemporaryRuntimeDir dir;
  const fs::path& work = dir.work;

  const run::SysfsTree ended = run::write_sysfs_tree(sysfs_files({IpAddress::v4(127, 77, 51, 1), "lo"}));
  const run::SysfsTree running = run::write_sysfs_tree(sysfs_files({IpAddress::v4(127, 77, 51, 2), "lo"}));
  REQUIRE((ended.error.empty() && running.error.empty()));
  REQUIRE((ended.lock >= 0 && running.lock >= 0));
  fs::create_directories(work / "run/sysfs-0000000000000001/class");  // an earlier softrdma's, unheld
  ::close(ended.lock);                                                // its program is gone

  const run::SysfsTree next = run::write_sysfs_tree(sysfs_files({IpAddress::v4(127, 77, 51, 3), "lo"}));
  REQUIRE(next.error.empty());
  CHECK(!fs::exists(ended.root));
  CHECK(!fs::exists(work / "run/sysfs-0000000000000001"));
  CHECK(fs::exists(fs::path(running.root) / "class/infiniband/srdma0/node_guid"));
  CHECK(fs::exists(fs::path(next.root) / "class/infiniband/srdma0/node_guid"));

  // A program that forked holds the tree until its last process ends.
  const pid_t child = ::fork();
  if (child == 0) {
    ::usleep(300'000);
    ::_exit(0);
  }
  ::close(running.lock);
  CHECK(run::write_sysfs_tree(sysfs_files({IpAddress::v4(127, 77, 51, 4), "lo"})).error.empty());
  CHECK(fs::exists(running.root));
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  const run::SysfsTree last = run::write_sysfs_tree(sysfs_files({IpAddress::v4(127, 77, 51, 5), "lo"}));
  REQUIRE(last.error.empty());
  CHECK(!fs::exists(running.root));
}

namespace {

// Folders standing for the machine's /sys/class/infiniband, /sys/class/infiniband_verbs and
// /dev/infiniband under WORK/real, with a kernel's rxe0 and mlx5_0 (a link, as sysfs has it) and
// entries named like softrdma's own, which the tree must not link.
run::RealFolders make_real_folders(const std::filesystem::path& work) {
  namespace fs = std::filesystem;
  const fs::path real = work / "real";
  fs::create_directories(real / "class/infiniband/rxe0");
  fs::create_directories(real / "class/infiniband/srdma0");
  fs::create_directories(real / "devices/mlx5_0");
  fs::create_symlink("../../devices/mlx5_0", real / "class/infiniband/mlx5_0");
  fs::create_directories(real / "class/infiniband_verbs/uverbs0");
  std::ofstream(real / "class/infiniband_verbs/abi_version") << "6\n";
  fs::create_directories(real / "dev/infiniband");
  for (const char* node : {"uverbs0", "rdma_cm", "uverbs_srdma0"}) std::ofstream(real / "dev/infiniband" / node);
  return {(real / "class/infiniband").string(), (real / "class/infiniband_verbs").string(),
          (real / "dev/infiniband").string()};
}

}  // namespace

TEST_CASE("sysfs tree: links to the machine's own devices beside softrdma's", "[sysfs-view]") {
  namespace fs = std::filesystem;
  const TemporaryRuntimeDir dir;
  const fs::path real = dir.work / "real";
  const run::RealFolders folders = make_real_folders(dir.work);

  const std::vector<SysfsFile> files = sysfs_files({IpAddress::v4(127, 77, 52, 1), "lo"});
  const run::SysfsTree tree = run::write_sysfs_tree(files, {}, folders);
  REQUIRE(tree.error.empty());
  const fs::path root = tree.root;
  CHECK(fs::read_symlink(root / "class/infiniband/rxe0") == real / "class/infiniband/rxe0");
  CHECK(fs::read_symlink(root / "class/infiniband/mlx5_0") == real / "devices/mlx5_0");  // where sysfs's points
  CHECK(fs::read_symlink(root / "class/infiniband_verbs/uverbs0") == real / "class/infiniband_verbs/uverbs0");
  CHECK(read_file(root / "class/infiniband_verbs/abi_version") == "6\n");
  CHECK(fs::read_symlink(root / "dev/infiniband/uverbs0") == real / "dev/infiniband/uverbs0");
  CHECK(fs::read_symlink(root / "dev/infiniband/rdma_cm") == real / "dev/infiniband/rdma_cm");
  // softrdma's own names stay its own.
  CHECK(!fs::is_symlink(root / "class/infiniband/srdma0"));
  CHECK(read_file(root / "class/infiniband/srdma0/node_type") == "1: CA\n");
  CHECK(fs::read_symlink(root / "dev/infiniband/uverbs_srdma0") == "/dev/null");

  // Without them (SOFTRDMA_REAL_DEVICES=hide): another tree, with no links.
  const run::SysfsTree plain = run::write_sysfs_tree(files);
  REQUIRE(plain.error.empty());
  CHECK(plain.root != tree.root);
  CHECK(!fs::exists(fs::path(plain.root) / "class/infiniband/rxe0"));
  CHECK(!fs::exists(fs::path(plain.root) / "class/infiniband_verbs"));
  CHECK(!fs::exists(fs::path(plain.root) / "dev/infiniband/uverbs0"));

  // The same devices: the same tree, its lost links written again; a new device: another tree.
  fs::remove(root / "class/infiniband/rxe0");
  CHECK(run::write_sysfs_tree(files, {}, folders).root == tree.root);
  CHECK(fs::read_symlink(root / "class/infiniband/rxe0") == real / "class/infiniband/rxe0");
  fs::create_directories(real / "class/infiniband/siw0");
  const run::SysfsTree more = run::write_sysfs_tree(files, {}, folders);
  CHECK(more.root != tree.root);
  CHECK(fs::is_symlink(fs::path(more.root) / "class/infiniband/siw0"));
}

TEST_CASE("sysfs view: the machine's folders are linked unless SOFTRDMA_REAL_DEVICES hides them", "[sysfs-view]") {
  for (const char* shown : {static_cast<const char*>(nullptr), "", "first", "after"}) {
    CAPTURE(shown != nullptr ? shown : "(unset)");
    ScopedVariable placement("SOFTRDMA_REAL_DEVICES", shown);
    const std::optional<run::RealFolders> folders = run::real_folders();
    REQUIRE(folders);
    CHECK(folders->infiniband_class == "/sys/class/infiniband");
    CHECK(folders->verbs_class == "/sys/class/infiniband_verbs");
    CHECK(folders->devices == "/dev/infiniband");
  }
  for (const char* hidden : {"hide", "last"}) {  // libibverbs hides them for a value it does not know
    CAPTURE(hidden);
    ScopedVariable placement("SOFTRDMA_REAL_DEVICES", hidden);
    CHECK(!run::real_folders());
  }
}

TEST_CASE("sysfs view: what softrdma run knows before exec", "[sysfs-view]") {
  ScopedVariable daemon("SOFTRDMA_DAEMON", nullptr);
  ScopedVariable netdev("SOFTRDMA_NETDEV", nullptr);
  {
    ScopedVariable ip("SOFTRDMA_IP", nullptr);
    const SysfsFacts facts = run::known_facts();
    CHECK(!facts.address);  // the device picks its 127.0.0.N later
    CHECK(facts.netdev == "lo");
  }
  ScopedVariable ip("SOFTRDMA_IP", "127.77.50.1");
  const SysfsFacts facts = run::known_facts();
  CHECK(facts.address == IpAddress::v4(127, 77, 50, 1));
  CHECK(facts.netdev == "lo");
}
