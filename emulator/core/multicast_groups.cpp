#include "emulator/core/multicast_groups.hpp"

#include <algorithm>
#include <cerrno>

namespace softrdma::core {

int MulticastGroups::attach(std::uint32_t qpn, const Gid& group) {
  auto it = groups_.find(group);
  if (it != groups_.end() && std::find(it->second.begin(), it->second.end(), qpn) != it->second.end()) return 0;
  if (attachments_ >= limits_.max_attachments) return ENOMEM;
  if (it == groups_.end()) {
    if (groups_.size() >= limits_.max_groups) return ENOMEM;
    it = groups_.emplace(group, std::vector<std::uint32_t>{}).first;
    changes_.push_back({group, true});
  } else if (it->second.size() >= limits_.max_qps_per_group) {
    return ENOMEM;
  }
  it->second.push_back(qpn);
  ++attachments_;
  return 0;
}

int MulticastGroups::detach(std::uint32_t qpn, const Gid& group) {
  const auto it = groups_.find(group);
  if (it == groups_.end()) return EINVAL;
  const auto member = std::find(it->second.begin(), it->second.end(), qpn);
  if (member == it->second.end()) return EINVAL;
  remove(it, static_cast<std::size_t>(member - it->second.begin()));
  return 0;
}

void MulticastGroups::detach_all(std::uint32_t qpn) {
  for (auto it = groups_.begin(); it != groups_.end();) {
    const auto next = std::next(it);
    const auto member = std::find(it->second.begin(), it->second.end(), qpn);
    if (member != it->second.end()) remove(it, static_cast<std::size_t>(member - it->second.begin()));
    it = next;
  }
}

void MulticastGroups::remove(std::map<Gid, std::vector<std::uint32_t>>::iterator group, std::size_t member) {
  group->second.erase(group->second.begin() + static_cast<std::ptrdiff_t>(member));
  --attachments_;
  if (!group->second.empty()) return;
  changes_.push_back({group->first, false});
  groups_.erase(group);
}

const std::vector<std::uint32_t>* MulticastGroups::members(const Gid& group) const {
  const auto it = groups_.find(group);
  return it == groups_.end() ? nullptr : &it->second;
}

std::optional<GroupChange> MulticastGroups::next_change() {
  if (changes_.empty()) return std::nullopt;
  const GroupChange c = changes_.front();
  changes_.pop_front();
  return c;
}

}  // namespace softrdma::core
