// The multicast groups of the device's port (IBTA vol. 1 s10.5): which UD QPs are attached to
// each MGID, within the device's limits, and the membership changes of the port that follow
// (its first QP attached: the port joins the group on the network; its last detached: the
// port leaves), which the host carries out.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <vector>

#include "emulator/core/verbs_types.hpp"

namespace softrdma::core {

// ibv_device_attr's max_mcast_grp, max_mcast_qp_attach and max_total_mcast_qp_attach. All 0:
// the device has no multicast (a host that cannot join groups).
struct MulticastLimits {
  std::uint32_t max_groups = 64;  // one socket each in the udp backend
  std::uint32_t max_qps_per_group = 64;
  std::uint32_t max_attachments = 64 * 64;
};

// The port starts (joined) or stops receiving `group`'s packets.
struct GroupChange {
  Gid group{};
  bool joined = false;
};

class MulticastGroups {
 public:
  explicit MulticastGroups(MulticastLimits limits) : limits_(limits) {}

  // 0, also for a QP attached already (it still receives one copy); ENOMEM at a limit.
  int attach(std::uint32_t qpn, const Gid& group);
  // 0, or EINVAL when the QP is not attached to the group.
  int detach(std::uint32_t qpn, const Gid& group);
  // Detaches `qpn` from every group (a destroyed QP).
  void detach_all(std::uint32_t qpn);
  // The QPs attached to `group`, in the order they attached; null when none is.
  const std::vector<std::uint32_t>* members(const Gid& group) const;
  // The next membership change of the port, in the order they happened.
  std::optional<GroupChange> next_change();

 private:
  void remove(std::map<Gid, std::vector<std::uint32_t>>::iterator group, std::size_t member);

  MulticastLimits limits_;
  std::map<Gid, std::vector<std::uint32_t>> groups_;
  std::uint32_t attachments_ = 0;
  std::deque<GroupChange> changes_;
};

}  // namespace softrdma::core
