#include "tools/softrdma/sysfs_tree.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <utility>

#include "emulator/host/runtime_dir.hpp"
#include "tools/softrdma/sysfs_tree_lock.hpp"
#include "verbs-shim/identity.hpp"

namespace softrdma::run {

namespace fs = std::filesystem;

namespace {

// One device's files, by its name.
struct DeviceFiles {
  const char* name;
  const std::vector<shim::SysfsFile>& files;
};

// A symbolic link in the tree: AT, relative to the root, pointing to TARGET.
struct Link {
  fs::path at;
  fs::path target;
};

// Everything a tree holds.
struct TreeContent {
  std::vector<DeviceFiles> devices;
  std::vector<Link> links;
};

// FNV-1a over every device's name, paths and contents and every link: the tree's name.
std::uint64_t content_hash(const TreeContent& tree) {
  std::uint64_t h = 0xcbf29ce484222325;
  auto add = [&h](const std::string& s) {
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3;
    h = (h ^ 0) * 0x100000001b3;  // the terminator keeps "ab"+"c" apart from "a"+"bc"
  };
  for (const DeviceFiles& d : tree.devices) {
    add(d.name);
    for (const shim::SysfsFile& f : d.files) {
      add(f.path);
      add(f.content);
    }
  }
  for (const Link& l : tree.links) {
    add(l.at.string());
    add(l.target.string());
  }
  return h;
}

fs::path device_dir(const fs::path& root, const char* name) { return root / "class" / "infiniband" / name; }

bool names_directory(const shim::SysfsFile& f) { return f.path.ends_with('/'); }

// srdma0's node under /dev/infiniband, which UCX requires to exist as a character device it may
// read and write before it uses a device. softrdma's verbs never go through it and no node of
// its own can be made without CAP_MKNOD, so it is a link to /dev/null.
Link device_node() {
  return {fs::path("dev") / "infiniband" / (std::string(shim::kDevNamePrefix) + shim::kDeviceName), "/dev/null"};
}

// Where a link to the machine's entry E of DIR points: where E points when E is itself a link
// (sysfs's rxe0 -> ../../devices/virtual/infiniband/rxe0), made absolute, else E. Never E when
// E is a link: a program resolving the view's link by hand (readlink -f, Python's realpath)
// would be sent back to the same path in the view, and loop.
fs::path real_target(const fs::path& dir, const fs::path& name) {
  std::error_code ec;
  const fs::path points_to = fs::read_symlink(dir / name, ec);
  return ec ? dir / name : (dir / points_to).lexically_normal();
}

// A link to every entry of the machine's DIR at AT in the tree but those named in TAKEN (the
// tree's own), in name order so that the tree's name does not depend on the directory's order.
// A DIR that is missing or unreadable has none.
std::vector<Link> links_to_entries(const fs::path& dir, const fs::path& at, const std::vector<std::string>& taken) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (std::find(taken.begin(), taken.end(), name) == taken.end()) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  std::vector<Link> links;
  for (const std::string& name : names) links.push_back({at / name, real_target(dir, name)});
  return links;
}

// The links to the entries of REAL's three folders, but the names softrdma's own use there
// (DEVICES' and srdma0's node): the view shows softrdma's device under its name.
std::vector<Link> real_links(const RealFolders& real, const std::vector<DeviceFiles>& devices) {
  std::vector<std::string> device_names;
  for (const DeviceFiles& d : devices) device_names.push_back(d.name);
  std::vector<Link> links = links_to_entries(real.infiniband_class, fs::path("class") / "infiniband", device_names);
  for (Link& l : links_to_entries(real.verbs_class, fs::path("class") / "infiniband_verbs", {})) {
    links.push_back(std::move(l));
  }
  const fs::path node = device_node().at;
  for (Link& l : links_to_entries(real.devices, node.parent_path(), {node.filename().string()})) {
    links.push_back(std::move(l));
  }
  return links;
}

// Whether ROOT still holds LINK, pointing where it should.
bool holds_link(const fs::path& root, const Link& link) {
  std::error_code ec;
  return fs::is_symlink(root / link.at, ec) && fs::read_symlink(root / link.at, ec) == link.target;
}

// Whether ROOT still holds every one of DEVICE's files with its content.
bool holds_files(const fs::path& root, const DeviceFiles& device) {
  std::error_code ec;
  for (const shim::SysfsFile& f : device.files) {
    const fs::path p = device_dir(root, device.name) / f.path;
    if (names_directory(f)) {
      if (!fs::is_directory(p, ec)) return false;
      continue;
    }
    std::ifstream in(p, std::ios::binary);
    const std::string content{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    if (!in || content != f.content) return false;
  }
  return true;
}

// Whether the tree at ROOT holds every device's files with their content, and every link.
bool holds(const fs::path& root, const TreeContent& tree) {
  return std::all_of(tree.devices.begin(), tree.devices.end(),
                     [&root](const DeviceFiles& d) { return holds_files(root, d); }) &&
         std::all_of(tree.links.begin(), tree.links.end(), [&root](const Link& l) { return holds_link(root, l); });
}

// Writes one device's files under ROOT; why it failed, or empty.
std::string write_files(const fs::path& root, const DeviceFiles& device) {
  std::error_code ec;
  for (const shim::SysfsFile& f : device.files) {
    const fs::path p = device_dir(root, device.name) / f.path;
    fs::create_directories(names_directory(f) ? p : p.parent_path(), ec);
    if (ec) return "cannot create " + p.parent_path().string() + ": " + ec.message();
    if (names_directory(f)) continue;
    const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);  // sysfs: read-only
    const bool written =
        fd >= 0 && ::write(fd, f.content.data(), f.content.size()) == static_cast<ssize_t>(f.content.size());
    const int err = errno;
    if (fd >= 0) ::close(fd);
    if (!written) return "cannot write " + p.string() + ": " + std::strerror(err);
  }
  return {};
}

// Writes LINK under ROOT; why it failed, or empty.
std::string write_link(const fs::path& root, const Link& link) {
  std::error_code ec;
  fs::create_directories((root / link.at).parent_path(), ec);
  if (!ec) fs::create_symlink(link.target, root / link.at, ec);
  return ec ? "cannot create " + (root / link.at).string() + ": " + ec.message() : std::string();
}

}  // namespace

namespace {

// Writes TREE under a temporary name and renames it to ROOT, holding it throughout.
SysfsTree write_tree(const std::string& dir, const fs::path& root, const TreeContent& tree) {
  std::string temporary = dir + "/.sysfs-XXXXXX";
  if (::mkdtemp(temporary.data()) == nullptr) {
    return {{}, "cannot create a directory in " + dir + ": " + std::strerror(errno)};
  }
  std::string error;
  for (const DeviceFiles& d : tree.devices) {
    if (error.empty()) error = write_files(temporary, d);
  }
  for (const Link& l : tree.links) {
    if (error.empty()) error = write_link(temporary, l);
  }
  int lock = -1;
  if (error.empty() && (lock = create_and_hold_tree(temporary)) < 0) {
    error = "cannot create a lock file in " + temporary + ": " + std::strerror(errno);
  }
  // Another run may have put the same tree in place first: then it is used.
  if (error.empty() && ::rename(temporary.c_str(), root.c_str()) != 0) {
    const int err = errno;
    ::close(lock);
    lock = hold_tree(root);
    if (lock < 0 || !holds(root, tree))
      error = "cannot rename " + temporary + " to " + root.string() + ": " + std::strerror(err);
  }
  std::error_code ec;
  fs::remove_all(temporary, ec);
  if (!error.empty()) {
    if (lock >= 0) ::close(lock);
    return {{}, error};
  }
  return {root.string(), {}, lock};
}

}  // namespace

SysfsTree write_sysfs_tree(const std::vector<shim::SysfsFile>& files, const std::vector<shim::SysfsFile>& iwarp_files,
                           const std::optional<RealFolders>& real) {
  TreeContent content{{{shim::kDeviceName, files}}, {device_node()}};
  if (!iwarp_files.empty()) content.devices.push_back({shim::kIwarpDeviceName, iwarp_files});
  if (real) {
    for (Link& l : real_links(*real, content.devices)) content.links.push_back(std::move(l));
  }
  const host::RuntimeDir dir = host::create_runtime_dir();
  if (!dir.error.empty()) return {{}, dir.error};
  char name[32];
  std::snprintf(name, sizeof name, "sysfs-%016llx", static_cast<unsigned long long>(content_hash(content)));
  const fs::path root = fs::absolute(fs::path(dir.path) / name);
  SysfsTree tree;
  if (const int lock = hold_tree(root); lock >= 0 && holds(root, content)) {
    tree = {root.string(), {}, lock};
  } else {
    if (lock >= 0) ::close(lock);
    std::error_code ec;
    fs::remove_all(root, ec);  // what is left of one that lost files
    tree = write_tree(dir.path, root, content);
  }
  if (tree.error.empty()) remove_unheld_trees(dir.path);
  return tree;
}

}  // namespace softrdma::run
