# shellcheck shell=bash
# Sourced by the interop scripts that boot the guests of rxe-guest.sh ($RXE, caching in $W):
# skips (the caller's `skip`, exit 77) where they cannot run, and builds the guest image once.
# The caller's `log` reports the build.

# Root, QEMU, network namespaces and the guest script; each missing one is one line.
check_guest_prerequisites() {
	[[ -x $RXE ]] || skip "no guest script at $RXE"
	((EUID == 0)) || skip "needs root for network namespaces and tap devices"
	command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 is not installed (scripts/install-deps.sh)"
	local probe_ns=softrdma-probe-$$
	ip netns add "$probe_ns" 2>/dev/null || skip "cannot create network namespaces here"
	ip netns del "$probe_ns"
}

# rxe-guest.sh build rebuilds everything (~95 s under TCG); its output is what is cached. The
# logs sit beside the cache ($W.build.log): on a fresh machine ~/.cache may not exist yet, and a
# log that cannot be opened skipped every case as "could not be built".
ensure_guest_image() {
	mkdir -p "$(dirname "$W")"
	if [[ ! -s $W/out/initrd.img || ! -s $W/out/vmlinuz ]]; then
		log "building the guest image once into $W (downloads ~280 MB)"
		"$RXE" build >"$W.build.log" 2>&1 || skip "the guest image could not be built (log: $W.build.log)"
	fi
}
