#!/usr/bin/env bash
# Builds softrdma's container image (deploy/container/Containerfile) from its Debian package, on
# a Debian 12 base image that it first makes here with debootstrap, since no image registry need
# be reachable. The base is made once: an existing one is kept. Prints the image's name last.
#
# usage: scripts/container-image.sh [options] DEB      (DEB: scripts/package.sh prints its path)
#   --tag NAME      the image to build (default localhost/softrdma:VERSION, the .deb's version)
#   --base NAME     the base image, made when missing (default localhost/debian:bookworm)
#   --mirror URL    Debian mirror for the base (default: this machine's apt source for bookworm)
#   --gid GID       GID of group softrdma in the image, whose members may attach (default 4791)
#   --rebuild-base  make the base image again even if it exists
# Needs root, debootstrap, and podman or buildah (apt-get install debootstrap podman).
# Environment: TOOL=podman|buildah (default: podman when installed, else buildah); BUILD_OPTS,
# more options for `TOOL build` (where crun refuses the host's cgroups: '--runtime runc').
set -euo pipefail

die() { echo "container-image.sh: $*" >&2; exit 1; }
usage() { sed -n '2,14s/^# \{0,1\}//p' "$0"; }

tag="" base=localhost/debian:bookworm mirror="" gid=4791 rebuild_base=0 deb=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --tag|--base|--mirror|--gid)
      [ $# -ge 2 ] || die "$1 needs a value"
      case "$1" in --tag) tag=$2 ;; --base) base=$2 ;; --mirror) mirror=$2 ;; --gid) gid=$2 ;; esac
      shift 2 ;;
    --rebuild-base) rebuild_base=1; shift ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) [ -z "$deb" ] || die "one .deb only (see --help)"; deb=$1; shift ;;
  esac
done

[ -n "$deb" ] || die "no .deb given (scripts/package.sh builds one; see --help)"
[ -f "$deb" ] || die "$deb: no such file"
if [ "$(dpkg-deb -f "$deb" Package 2>/dev/null)" != softrdma ]; then die "$deb is not a softrdma Debian package"; fi
version=$(dpkg-deb -f "$deb" Version)
if ! [[ "$gid" =~ ^[1-9][0-9]*$ ]]; then die "--gid wants a number above 0, not '$gid'"; fi
tag=${tag:-localhost/softrdma:$version}
[ "$(id -u)" -eq 0 ] || die "run as root (debootstrap, and the system's image store)"

TOOL=${TOOL:-$(command -v podman >/dev/null && echo podman || echo buildah)}
case "$TOOL" in podman|buildah) ;; *) die "TOOL must be podman or buildah, not '$TOOL'" ;; esac
command -v "$TOOL" >/dev/null || die "$TOOL is not installed (apt-get install podman, or buildah)"

root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /var/tmp/softrdma-image.XXXXXX)  # /var/tmp: a real disk, not a tmpfs
# debootstrap mounts /proc and /sys in the rootfs (and may bind /dev): a failed run can leave them,
# and nothing is deleted through them.
cleanup() {
  awk -v w="$work/" 'index($2, w) == 1 { print $2 }' /proc/self/mounts | sort -r | xargs -r -n1 umount -l || true
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT

image_exists() {
  if [ "$TOOL" = podman ]; then podman image exists "$1"; else buildah inspect --type image "$1" >/dev/null 2>&1; fi
}

# This machine's source for a Debian suite, from apt's own configuration (both file formats).
apt_site() {
  # shellcheck disable=SC2016  # apt's own $(FIELD) syntax
  apt-get indextargets --format '$(RELEASE) $(SITE)' 'Identifier: Packages' 2>/dev/null |
    awk -v s="$1" '$1 == s { print $2; exit }'
}

make_base() {
  command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
  mirror=${mirror:-$(apt_site bookworm)}
  mirror=${mirror:-http://deb.debian.org/debian}
  local security rootfs=$work/rootfs
  security=$(apt_site bookworm-security)
  security=${security:-http://deb.debian.org/debian-security}
  echo "container-image.sh: making $base from $mirror (debootstrap --variant=minbase bookworm)" >&2
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    die "debootstrap failed; the end of its log: $(tail -n 1 "$rootfs/debootstrap/debootstrap.log" 2>/dev/null || tail -n 1 "$work/debootstrap.log")"
  # Updates and security updates too, which debootstrap's one-line sources.list leaves out.
  rm -f "$rootfs/etc/apt/sources.list"
  cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  # Slim, as Debian's -slim images: no documentation but copyrights, no man pages, no translations,
  # neither now nor from packages installed later.
  printf '%s\n' 'path-exclude /usr/share/doc/*' 'path-include /usr/share/doc/*/copyright' \
    'path-exclude /usr/share/man/*' 'path-exclude /usr/share/info/*' 'path-exclude /usr/share/locale/*' \
    >"$rootfs/etc/dpkg/dpkg.cfg.d/excludes"
  find "$rootfs/usr/share/doc" -type f ! -name copyright -delete
  find "$rootfs/usr/share/doc" -type l -delete
  find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/*
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb
  tar --numeric-owner --xattrs -C "$rootfs" -cf "$work/rootfs.tar" . || die "cannot pack $rootfs"
  if [ "$TOOL" = podman ]; then
    podman import --change 'CMD ["/bin/bash"]' "$work/rootfs.tar" "$base" >/dev/null || die "podman import of $base failed"
  else
    local ctr
    ctr=$(buildah from scratch) || die "buildah from scratch failed"
    if ! { buildah add "$ctr" "$work/rootfs.tar" / && buildah config --cmd /bin/bash "$ctr" &&
           buildah commit --rm "$ctr" "$base"; } >/dev/null; then
      die "buildah commit of $base failed"
    fi
  fi
  rm -rf "$rootfs" "$work/rootfs.tar"
}

if [ "$rebuild_base" = 1 ] || ! image_exists "$base"; then
  make_base
else
  echo "container-image.sh: $base exists; kept (--rebuild-base makes it again)" >&2
fi

# A context of the .deb alone, so that the build sends no more than it needs.
mkdir -p "$work/context"
cp "$deb" "$work/context/softrdma_${version}_$(dpkg-deb -f "$deb" Architecture).deb"
# shellcheck disable=SC2086  # BUILD_OPTS: options split at spaces
"$TOOL" build ${BUILD_OPTS:-} --pull=never -f "$root/deploy/container/Containerfile" --build-arg "BASE=$base" \
  --build-arg "SOFTRDMA_GID=$gid" -t "$tag" "$work/context" >&2 || die "$TOOL build of $tag failed"
echo "$tag"
