// rdma_event_str: the name of a connection manager event, the strings rdma-core's cma.c
// returns (programs print them: rping's "cma event RDMA_CM_EVENT_REJECTED, error 8").
#include <cstring>

#include "verbs-shim/rdmacm/rdmacm_api.hpp"

static_assert(sizeof(rdma_cm_event_type) == sizeof(int), "a C enum is an int on x86-64");

SRDMA_RDMACM_VERSION(rdma_event_str, "RDMACM_1.0")
const char* srdma_rdmacm_rdma_event_str(rdma_cm_event_type event) {
  // A C program may pass any int. Read it as one: C++ may assume an enum holds a value in its
  // enumerators' range (UBSan's -fsanitize=enum checks every load of it).
  int value = 0;
  std::memcpy(&value, &event, sizeof value);
  switch (value) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      return "RDMA_CM_EVENT_ADDR_RESOLVED";
    case RDMA_CM_EVENT_ADDR_ERROR:
      return "RDMA_CM_EVENT_ADDR_ERROR";
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
      return "RDMA_CM_EVENT_ROUTE_RESOLVED";
    case RDMA_CM_EVENT_ROUTE_ERROR:
      return "RDMA_CM_EVENT_ROUTE_ERROR";
    case RDMA_CM_EVENT_CONNECT_REQUEST:
      return "RDMA_CM_EVENT_CONNECT_REQUEST";
    case RDMA_CM_EVENT_CONNECT_RESPONSE:
      return "RDMA_CM_EVENT_CONNECT_RESPONSE";
    case RDMA_CM_EVENT_CONNECT_ERROR:
      return "RDMA_CM_EVENT_CONNECT_ERROR";
    case RDMA_CM_EVENT_UNREACHABLE:
      return "RDMA_CM_EVENT_UNREACHABLE";
    case RDMA_CM_EVENT_REJECTED:
      return "RDMA_CM_EVENT_REJECTED";
    case RDMA_CM_EVENT_ESTABLISHED:
      return "RDMA_CM_EVENT_ESTABLISHED";
    case RDMA_CM_EVENT_DISCONNECTED:
      return "RDMA_CM_EVENT_DISCONNECTED";
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      return "RDMA_CM_EVENT_DEVICE_REMOVAL";
    case RDMA_CM_EVENT_MULTICAST_JOIN:
      return "RDMA_CM_EVENT_MULTICAST_JOIN";
    case RDMA_CM_EVENT_MULTICAST_ERROR:
      return "RDMA_CM_EVENT_MULTICAST_ERROR";
    case RDMA_CM_EVENT_ADDR_CHANGE:
      return "RDMA_CM_EVENT_ADDR_CHANGE";
    case RDMA_CM_EVENT_TIMEWAIT_EXIT:
      return "RDMA_CM_EVENT_TIMEWAIT_EXIT";
  }
  return "UNKNOWN EVENT";  // any other value a program passes
}
