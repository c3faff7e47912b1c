#!/usr/bin/env bash
# Installs what is needed, builds, and runs every test softrdma has: ctest in a warnings-as-errors
# build under AddressSanitizer + UndefinedBehaviorSanitizer; the tests that need full speed
# (ctest -L uninstrumented), the Debian package's install test and the rxe/siw
# interoperability suite on a release build; the engine's line coverage; and each libFuzzer
# target for a bounded time. Exits non-zero on the first failure.
#
# Environment: FUZZ_SECONDS (per target, default 15), JOBS (default: nproc).
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZ_SECONDS=${FUZZ_SECONDS:-15}
JOBS=${JOBS:-$(nproc)}
step() { printf '\n=== %s (%ss)\n' "$*" "$SECONDS"; }

step "install dependencies"
scripts/install-deps.sh

step "build (gcc, ASan + UBSan, warnings as errors; the engine also for line coverage)"
# Every ctest runs once: in this instrumented build, but for those labelled uninstrumented,
# which the release build below runs.
# Line tables only (-g1): all that the sanitizers' reports need, and a quarter less compile time.
cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG=-g1 -DCMAKE_CXX_FLAGS_DEBUG=-g1 \
  -DSOFTRDMA_WERROR=ON -DSOFTRDMA_SANITIZE=ON -DSOFTRDMA_COVERAGE=ON >/dev/null
cmake --build build/asan -j "$JOBS"

step "tests under ASan + UBSan"
(cd build/asan && ctest --output-on-failure -j "$JOBS" -LE uninstrumented)

step "build (release) of the package and of the tools the benchmarks, MPI and interoperability tests run"
# Installed under /usr, as the Debian package puts it.
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DSOFTRDMA_INTEROP=ON -DCMAKE_INSTALL_PREFIX=/usr >/dev/null
cmake --build build/release -j "$JOBS" --target package_contents iwarp_rping udp_pingpong mpi_check host_tests

step "tests that need an uninstrumented build: the benchmark scripts' smoke runs, rstream's suite, MPI, timed batching"
(cd build/release && ctest -L uninstrumented --output-on-failure -j "$JOBS")

step "the Debian package: built, installed, used from the installed files only, purged"
tests/package/install_test.sh build/release

step "interoperability with Linux rxe and siw (a QEMU guest; skipped where it cannot boot)"
# tests/interop/rxe_interop.sh: the rxe matrix both ways and the siw cases, ~9 minutes with the guest image
# cached in ~/.cache/softrdma-interop (its first build downloads ~280 MB of Debian packages,
# ~95 s more). The guest is emulated (TCG): the script runs a failing case once more itself,
# and ctest reruns the whole suite once if it still fails (the guest that would not boot, say);
# every first failure stays in the log.
(cd build/release && ctest -L interop --output-on-failure --repeat until-pass:2)

step "line coverage of emulator/core by its own tests (gcovr)"
# The ASan build's engine is instrumented; what every other test reached there is cleared, so
# only core_tests count.
find build/asan -name '*.gcda' -delete
(cd build/asan && ./tests/core/core_tests >/dev/null)
gcovr -r . --filter 'emulator/core/' --fail-under-line 90 build/asan

step "fuzz every parser for ${FUZZ_SECONDS}s each (clang libFuzzer)"
cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DSOFTRDMA_FUZZ=ON >/dev/null
targets=$(cd tests/fuzz/corpus && ls)
cmake --build build/fuzz -j "$JOBS" --target $(printf 'fuzz_%s ' $targets)
fuzz_one() {
  local t=$1 work
  work=$(mktemp -d)
  # New inputs go to a scratch folder; the kept corpus (and any crasher added to it) is only
  # read. A crash writes crash-* here and fails the run.
  if ! build/fuzz/tests/fuzz/fuzz_"$t" -max_total_time="$FUZZ_SECONDS" -print_final_stats=0 \
      -artifact_prefix="build/fuzz/crash-$t-" "$work" "tests/fuzz/corpus/$t" 2> "build/fuzz/$t.log"; then
    tail -n 30 "build/fuzz/$t.log"
    echo "fuzz_$t found a crash: see build/fuzz/crash-$t-*; add it to tests/fuzz/corpus/$t once fixed"
    return 1
  fi
  echo "fuzz_$t: $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "build/fuzz/$t.log" | tail -n 1)"
  rm -rf "$work"
}
export -f fuzz_one
export FUZZ_SECONDS
# One fuzzer per core at a time: each still gets a whole core for its FUZZ_SECONDS.
printf '%s\n' $targets | xargs -P "$JOBS" -I{} bash -c 'fuzz_one "$1"' _ {}

step "all passed"
