#!/usr/bin/env bash
# Installs every Debian package that softrdma's build, tests, fuzzers and benchmarks need.
# Idempotent and non-interactive; safe to run on a fresh machine or a used one.
set -euo pipefail

packages=(
  # build
  cmake ninja-build g++ clang libclang-rt-14-dev pkg-config
  # libraries
  catch2 libboost-dev libpcap-dev libibverbs-dev
  # the dpdk backend (emulator/net/dpdk_*): EAL and every PMD as shared libraries
  libdpdk-dev
  # test and report tools; clang-format-14 judges the layout (tests/check_format.sh)
  tshark wireshark-common gcovr clang-format-14
  # network namespaces with veth pairs (two hosts on one machine) and captures on them
  iproute2 tcpdump
  # unmodified RDMA programs the verbs shim is tested with (rdma-core 44 in Debian 12), and
  # objdump/readelf for the shim's export-table check
  ibverbs-utils ibverbs-providers librdmacm-dev rdmacm-utils perftest qperf python3-pyverbs binutils
  # the Debian package: cpack's dependency list (dpkg-shlibdeps), and its install test's man -w
  dpkg-dev man-db
  # tests/deploy: the Kubernetes manifests read by Debian's Python
  python3-yaml
  # the communication library real stacks reach verbs through (ucx_info, ucx_perftest), and
  # Open MPI over it (mpirun, and mpicc for tests/mpi)
  ucx-utils openmpi-bin libopenmpi-dev
  # scripts/bench.sh: the kernel baselines perftest is compared with, and its plot
  iperf3 sockperf gnuplot-nox
  # tests/interop/rxe_interop.sh: the Linux rxe guests (SOFTRDMA_SHARED_DIR/tools/interop-vm), whose
  # build compiles siw.ko out of tree with the guest kernel's compiler
  qemu-system-x86 gcc-12 make xz-utils
)

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# tshark asks whether non-root users may capture; answer once, without a prompt.
echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
