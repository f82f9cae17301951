#!/usr/bin/env bash
# scripts/deps.sh -- make sure the Debian packages a make target needs are here.
#
# Usage: scripts/deps.sh build|test|bench|fuzz
# Checks each package with dpkg-query; installs the missing ones with apt-get
# when run as root, otherwise prints the exact apt-get line and exits 1.
set -euo pipefail

build_pkgs=(gcc make cmake pkg-config libuv1-dev libcmocka-dev)
test_pkgs=("${build_pkgs[@]}" python3 python3-pytest python3-redis redis-tools)
bench_pkgs=("${build_pkgs[@]}" redis-server redis-tools etcd-server etcd-client beanstalkd procps)
fuzz_pkgs=("${build_pkgs[@]}" clang libclang-rt-14-dev)

case "${1:-build}" in
  build) want=("${build_pkgs[@]}") ;;
  test)  want=("${test_pkgs[@]}") ;;
  bench) want=("${bench_pkgs[@]}") ;;
  fuzz)  want=("${fuzz_pkgs[@]}") ;;
  *) echo "usage: $0 build|test|bench|fuzz" >&2; exit 2 ;;
esac

missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

line="apt-get install -y ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "ordo needs these Debian packages: ${missing[*]}" >&2
  echo "run as root:  apt-get update && $line" >&2
  exit 1
fi
echo "deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >&2
apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
