// `softrdma devices [--ip ADDR | --netdev IFNAME]`: what ibv_devinfo would say about softrdma's devices (name,
// node GUID, port state, MTU, GID 0), plus the address each is bound to. It asks the real
// thing: it loads softrdma's libibverbs.so.1 (found as `softrdma run` finds it) and calls its
// verbs, so it shows exactly what a program under `softrdma run` would see.
#pragma once

namespace softrdma::devices {

int devices_main(int argc, char** argv);  // argv[0] is "devices"

}  // namespace softrdma::devices
