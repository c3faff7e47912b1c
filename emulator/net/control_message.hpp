// Writing a socket call's control messages (cmsg(3)), for the UDP backend's sends and the
// benchmark that makes the same calls.
#pragma once

#include <sys/socket.h>

#include <cstring>

namespace softrdma::net {

// Appends one control message to `h`, whose msg_control has room for it.
template <class T>
void add_cmsg(msghdr& h, int level, int type, T value) {
  auto* c = reinterpret_cast<cmsghdr*>(static_cast<char*>(h.msg_control) + h.msg_controllen);
  c->cmsg_level = level;
  c->cmsg_type = type;
  c->cmsg_len = CMSG_LEN(sizeof value);
  std::memcpy(CMSG_DATA(c), &value, sizeof value);
  h.msg_controllen += CMSG_SPACE(sizeof value);
}

}  // namespace softrdma::net
