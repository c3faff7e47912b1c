#include "tools/softrdma/sysfs_tree.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

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

// FNV-1a over every device's name, paths and contents: the tree's name.
std::uint64_t content_hash(const std::vector<DeviceFiles>& devices) {
  std::uint64_t h = 0xcbf29ce484222325;
  auto add = [&h](const std::string& s) {
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3;
    h = (h ^ 0) * 0x100000001b3;  // the terminator keeps "ab"+"c" apart from "a"+"bc"
  };
  for (const DeviceFiles& d : devices) {
    add(d.name);
    for (const shim::SysfsFile& f : d.files) {
      add(f.path);
      add(f.content);
    }
  }
  return h;
}

fs::path device_dir(const fs::path& root, const char* name) { return root / "class" / "infiniband" / name; }

bool names_directory(const shim::SysfsFile& f) { return f.path.ends_with('/'); }

// srdma0's node under /dev/infiniband, which UCX requires to exist as a character device it may
// read and write before it uses a device. softrdma's verbs never go through it and no node of
// its own can be made without CAP_MKNOD, so it is a link to /dev/null.
fs::path device_node(const fs::path& root) {
  return root / "dev" / "infiniband" / (std::string(shim::kDevNamePrefix) + shim::kDeviceName);
}
constexpr const char* kDeviceNodeTarget = "/dev/null";

// Whether the tree at ROOT holds every device's files with their content, and the device node.
bool holds(const fs::path& root, const std::vector<DeviceFiles>& devices) {
  std::error_code ec;
  if (!fs::is_symlink(device_node(root), ec) || fs::read_symlink(device_node(root), ec) != kDeviceNodeTarget) {
    return false;
  }
  for (const DeviceFiles& d : devices) {
    for (const shim::SysfsFile& f : d.files) {
      const fs::path p = device_dir(root, d.name) / f.path;
      if (names_directory(f)) {
        if (!fs::is_directory(p, ec)) return false;
        continue;
      }
      std::ifstream in(p, std::ios::binary);
      const std::string content{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
      if (!in || content != f.content) return false;
    }
  }
  return true;
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

std::string write_device_node(const fs::path& root) {
  std::error_code ec;
  fs::create_directories(device_node(root).parent_path(), ec);
  if (!ec) fs::create_symlink(kDeviceNodeTarget, device_node(root), ec);
  return ec ? "cannot create " + device_node(root).string() + ": " + ec.message() : std::string();
}

}  // namespace

namespace {

// Writes DEVICES' tree under a temporary name and renames it to ROOT, holding it throughout.
SysfsTree write_tree(const std::string& dir, const fs::path& root, const std::vector<DeviceFiles>& devices) {
  std::string temporary = dir + "/.sysfs-XXXXXX";
  if (::mkdtemp(temporary.data()) == nullptr) {
    return {{}, "cannot create a directory in " + dir + ": " + std::strerror(errno)};
  }
  std::string error;
  for (const DeviceFiles& d : devices) {
    if (error.empty()) error = write_files(temporary, d);
  }
  if (error.empty()) error = write_device_node(temporary);
  int lock = -1;
  if (error.empty() && (lock = create_and_hold_tree(temporary)) < 0) {
    error = "cannot create a lock file in " + temporary + ": " + std::strerror(errno);
  }
  // Another run may have put the same tree in place first: then it is used.
  if (error.empty() && ::rename(temporary.c_str(), root.c_str()) != 0) {
    const int err = errno;
    ::close(lock);
    lock = hold_tree(root);
    if (lock < 0 || !holds(root, devices))
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

SysfsTree write_sysfs_tree(const std::vector<shim::SysfsFile>& files, const std::vector<shim::SysfsFile>& iwarp_files) {
  std::vector<DeviceFiles> devices = {{shim::kDeviceName, files}};
  if (!iwarp_files.empty()) devices.push_back({shim::kIwarpDeviceName, iwarp_files});
  const host::RuntimeDir dir = host::create_runtime_dir();
  if (!dir.error.empty()) return {{}, dir.error};
  char name[32];
  std::snprintf(name, sizeof name, "sysfs-%016llx", static_cast<unsigned long long>(content_hash(devices)));
  const fs::path root = fs::absolute(fs::path(dir.path) / name);
  SysfsTree tree;
  if (const int lock = hold_tree(root); lock >= 0 && holds(root, devices)) {
    tree = {root.string(), {}, lock};
  } else {
    if (lock >= 0) ::close(lock);
    std::error_code ec;
    fs::remove_all(root, ec);  // what is left of one that lost files
    tree = write_tree(dir.path, root, devices);
  }
  if (tree.error.empty()) remove_unheld_trees(dir.path);
  return tree;
}

}  // namespace softrdma::run
