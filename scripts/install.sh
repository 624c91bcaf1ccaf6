#!/usr/bin/env bash
# Install everything sregym needs on a Debian 12 host (root): Debian packages, the Python
# package, and the Go-built cluster binaries (cached under /var/cache/sregym by version).
# Idempotent and quick on a warm machine. Used by the README and by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
  echo "install.sh: run as root (it installs Debian packages and the cluster runs as root)" >&2
  exit 4
fi

# Packages the local cluster, images and tests need; helpers add theirs to .ci/apt-packages.txt.
PKGS=(containerd runc containernetworking-plugins iptables iproute2 conntrack ethtool socat
      debootstrap gcc libc6-dev stress-ng strace fuse3 prometheus ipset)
if [ -f .ci/apt-packages.txt ]; then
  while read -r p; do [ -n "${p%%#*}" ] && PKGS+=("${p%%#*}"); done < .ci/apt-packages.txt
fi
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "install.sh: apt-get install ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v go >/dev/null; then
  echo "install.sh: Go >= 1.25 is required to build the Kubernetes components (https://go.dev/dl/)" >&2
  exit 4
fi

python3 -m pip install -q --disable-pip-version-check -e '.[test]'
# The images that take no Go binary (the base and every app) are built meanwhile: their build is
# mostly downloads and unpacking, the Go builds are CPU. On a cold machine that hides most of the
# images stage (394 s measured cold on 2026-11-27) behind the Go builds; on a warm one both are cached.
cache=${SREGYM_CACHE:-/var/cache/sregym}
mkdir -p "$cache"
python3 -m sregym images build --no-load --without-binaries > "$cache/images-beside-go.log" 2>&1 &
images_pid=$!
trap '[ -n "$images_pid" ] && kill "$images_pid" 2>/dev/null' EXIT  # an interrupted install stops it too
go_rc=0
python3 -m sregym.cluster.binaries || go_rc=$?
images_rc=0
wait "$images_pid" || images_rc=$?
images_pid=""
if [ "$images_rc" -ne 0 ]; then
  # not fatal here: `sregym images build` builds them again and reports its own error
  echo "install.sh: building images beside the Go builds failed (rc=$images_rc); see $cache/images-beside-go.log" >&2
else
  echo "install.sh: images beside the Go builds: $(tail -n 1 "$cache/images-beside-go.log")"
fi
exit "$go_rc"
