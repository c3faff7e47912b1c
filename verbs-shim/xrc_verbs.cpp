// XRC domains (IBTA vol. 1 annex A14) through verbs_context's open_xrcd and close_xrcd. A domain
// opened with a file is shared by every open of that file's inode on the device, as uverbs keys
// it; the device of embedded mode lives in this process, so the sharing reaches that far.
#include <fcntl.h>
#include <sys/stat.h>

#include <compare>
#include <map>
#include <mutex>
#include <new>
#include <optional>

#include "verbs-shim/context.hpp"
#include "verbs-shim/host_link.hpp"
#include "verbs-shim/objects.hpp"
#include "verbs-shim/ops.hpp"

namespace softrdma::shim {

namespace {

// A file's domain on one device.
struct InodeKey {
  const host::DeviceLink* device;
  FileId file;
  auto operator<=>(const InodeKey&) const = default;
};

struct SharedDomain {
  std::uint32_t handle = 0;
  std::uint32_t opens = 0;
};

struct Domains {
  std::mutex mutex;
  std::map<InodeKey, SharedDomain> by_inode;
};

Domains& domains() {
  static Domains d;
  return d;
}

// The engine domain for opening `fd` with `oflags` (ibv_open_xrcd(3), with uverbs' errno
// values): the inode's own when it has one (EINVAL with O_EXCL), else a new one (EAGAIN
// without O_CREAT).
core::Expected<std::uint32_t> open_shared(host::DeviceLink& device, const InodeKey& key, int oflags) {
  using Result = core::Expected<std::uint32_t>;
  Domains& d = domains();
  std::lock_guard lock(d.mutex);
  const auto found = d.by_inode.find(key);
  if (found != d.by_inode.end()) {
    if (oflags & O_EXCL) return Result::error(EINVAL);
    ++found->second.opens;
    return found->second.handle;
  }
  if (!(oflags & O_CREAT)) return Result::error(EAGAIN);
  const auto handle = device.alloc_xrcd();
  if (handle) d.by_inode[key] = {*handle, 1};
  return handle;
}

// Gives up one open of a shared domain; the last one frees it (EBUSY, and still open, while
// XRC SRQs or targets are in it).
int close_shared(host::DeviceLink& device, const InodeKey& key) {
  Domains& d = domains();
  std::lock_guard lock(d.mutex);
  SharedDomain& shared = d.by_inode.at(key);
  if (shared.opens > 1) {
    --shared.opens;
    return 0;
  }
  if (const int err = device.dealloc_xrcd(shared.handle)) return err;
  d.by_inode.erase(key);
  return 0;
}

}  // namespace

bool offers_xrc(ibv_context* context) {
  return identity_of(context).transport != Transport::iwarp && link(context).has_xrc();
}

ibv_xrcd* open_xrcd_op(ibv_context* context, ibv_xrcd_init_attr* attr) {
  constexpr std::uint32_t kNeeded = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  if (attr == nullptr || (attr->comp_mask & kNeeded) != kNeeded || attr->comp_mask >= IBV_XRCD_INIT_ATTR_RESERVED) {
    errno = EINVAL;
    return nullptr;
  }
  if (!offers_xrc(context)) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  auto* x = new (std::nothrow) Xrcd{};
  if (x == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  host::DeviceLink& device = link(context);
  core::Expected<std::uint32_t> handle = core::Expected<std::uint32_t>::error(EBADF);
  struct stat st {};
  if (attr->fd == -1) {
    handle = device.alloc_xrcd();  // a domain of its own, shared with no one
  } else if (::fstat(attr->fd, &st) == 0) {
    x->file = FileId{st.st_dev, st.st_ino};
    handle = open_shared(device, {&device, *x->file}, attr->oflags);
  }
  if (!handle) {
    delete x;
    errno = handle.error();
    return nullptr;
  }
  x->xrcd.context = context;
  x->handle = *handle;
  return &x->xrcd;
}

int close_xrcd_op(ibv_xrcd* xrcd) {
  if (xrcd == nullptr) return EINVAL;
  auto* x = reinterpret_cast<Xrcd*>(xrcd);
  host::DeviceLink& device = link(xrcd->context);
  const int err = x->file ? close_shared(device, {&device, *x->file}) : device.dealloc_xrcd(x->handle);
  if (err != 0) return err;
  delete x;
  return 0;
}

}  // namespace softrdma::shim
