#!/usr/bin/env bash
# scripts/deps.sh -- make sure what a make target needs is here.
#
# Usage: scripts/deps.sh build|test|bench|fuzz
# On Debian (dpkg-query present): checks each package; installs the missing
# ones with apt-get when run as root, otherwise prints the exact apt-get
# line and exits 1.
# Elsewhere: checks for the tools, libraries (pkg-config modules) and
# Python modules themselves, prints each one missing and exits 1 if any
# is; installing them is left to the system's own package manager.
set -euo pipefail

build_pkgs=(gcc make cmake pkg-config libuv1-dev libcmocka-dev libhttp-parser-dev libraft-dev libssl-dev)
# C raft (cluster mode) must be the maintained 0.22 line: bookworm itself has
# 0.15 (archived upstream, known election bugs); bookworm-backports has 0.22.
raft_min=0.22
test_pkgs=("${build_pkgs[@]}" python3 python3-pytest python3-pytest-xdist python3-redis redis-server redis-tools libhiredis-dev python3-prometheus-client curl chromium openssl)
bench_pkgs=("${build_pkgs[@]}" redis-server redis-tools etcd-server etcd-client beanstalkd procps wrk openssl)
fuzz_pkgs=("${build_pkgs[@]}" clang libclang-rt-14-dev)

target=${1:-build}
case "$target" in
  build) want=("${build_pkgs[@]}") ;;
  test)  want=("${test_pkgs[@]}") ;;
  bench) want=("${bench_pkgs[@]}") ;;
  fuzz)  want=("${fuzz_pkgs[@]}") ;;
  *) echo "usage: $0 build|test|bench|fuzz" >&2; exit 2 ;;
esac

# ---- not Debian: look for the things themselves ----------------------------

missing=()
need_cmd() {  # need_cmd WHAT CMD...: one of the commands must be on PATH
  local what=$1; shift
  for c in "$@"; do command -v "$c" >/dev/null 2>&1 && return 0; done
  missing+=("$what")
}
need_pc() {  # need_pc MODULE: pkg-config knows the library (headers and flags)
  command -v pkg-config >/dev/null 2>&1 && pkg-config --exists "$1" && return 0
  missing+=("$1 (pkg-config module, with its headers)")
}
need_header() {  # need_header WHAT FILE: a header the C compiler finds (no pkg-config module for it)
  local what=$1
  printf '#include <%s>\n' "$2" | ${CC:-cc} -E -x c - >/dev/null 2>&1 && return 0
  missing+=("$what")
}
need_py() {  # need_py MODULE: the Python the tests run (/usr/bin/python3) imports it
  local py=/usr/bin/python3
  [ -x "$py" ] || py=$(command -v python3 || true)
  [ -n "$py" ] && "$py" -c "import $1" >/dev/null 2>&1 && return 0
  missing+=("python3 module $1")
}

check_tools() {
  need_cmd "a C compiler (gcc or cc)" gcc cc
  need_cmd make make
  need_cmd cmake cmake
  need_cmd pkg-config pkg-config
  need_pc libuv
  need_pc cmocka
  need_pc "openssl >= 3"
  need_header "http_parser.h (Node's http-parser)" http_parser.h
  if ! { command -v pkg-config >/dev/null 2>&1 && pkg-config --atleast-version=$raft_min raft; }; then
    missing+=("raft >= $raft_min (C raft, the cowsql line; pkg-config module raft)")
  fi
  case "$target" in
    test)
      need_cmd python3 python3
      need_py pytest
      need_py xdist
      need_py redis
      need_py prometheus_client
      need_cmd redis-server redis-server
      need_cmd redis-cli redis-cli
      need_pc hiredis
      need_cmd curl curl
      need_cmd openssl openssl
      need_cmd chromium chromium chromium-browser ;;
    bench)
      need_cmd redis-server redis-server
      need_cmd redis-cli redis-cli
      need_cmd etcd etcd
      need_cmd etcdctl etcdctl
      need_cmd beanstalkd beanstalkd
      need_cmd "ps (procps)" ps
      need_cmd wrk wrk ;;
    fuzz)
      need_cmd clang clang ;;
  esac
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "ordo needs, for 'make $target', what this system does not have:" >&2
  for m in "${missing[@]}"; do echo "  - $m" >&2; done
  echo "(on Debian: apt-get install ${want[*]})" >&2
  return 1
}

if ! command -v dpkg-query >/dev/null 2>&1; then
  check_tools
  exit $?
fi

# ---- Debian: the packages ----------------------------------------------------

raft_ok() {  # libraft-dev is installed at raft_min or later
  local v
  v=$(dpkg-query -W -f='${Status} ${Version}' libraft-dev 2>/dev/null) || return 1
  case "$v" in "install ok installed "*) ;; *) return 1 ;; esac
  dpkg --compare-versions "${v##* }" ge "$raft_min"
}
for p in "${want[@]}"; do
  if [ "$p" = libraft-dev ]; then
    raft_ok || missing+=("$p")
  elif ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

# libraft-dev comes from bookworm-backports (see raft_min above).
backports=/etc/apt/sources.list.d/bookworm-backports.sources
need_raft=false
for p in "${missing[@]}"; do [ "$p" = libraft-dev ] && need_raft=true; done
release=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
has_backports() { grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; }

others=()
for p in "${missing[@]}"; do [ "$p" = libraft-dev ] || others+=("$p"); done
line="apt-get install -y ${others[*]:-}"
raft_line="apt-get install -y -t bookworm-backports libraft-dev"
if [ "$(id -u)" -ne 0 ]; then
  echo "ordo needs these Debian packages: ${missing[*]}" >&2
  if $need_raft && ! has_backports; then
    echo "libraft-dev >= $raft_min is in bookworm-backports; add it to apt's sources first:" >&2
    echo "  printf 'Types: deb\\nURIs: http://deb.debian.org/debian\\nSuites: bookworm-backports\\nComponents: main\\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\\n' > $backports" >&2
  fi
  echo -n "run as root:  apt-get update" >&2
  [ ${#others[@]} -gt 0 ] && echo -n " && $line" >&2
  $need_raft && echo -n " && $raft_line" >&2
  echo >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if $need_raft && ! has_backports; then
  if [ "$release" != bookworm ]; then
    echo "deps: libraft-dev >= $raft_min is needed; this is Debian '$release', not bookworm: install it from this release's packages" >&2
  else
    echo "deps: adding bookworm-backports to apt's sources ($backports): libraft-dev >= $raft_min comes from there" >&2
    printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' >"$backports"
  fi
fi
echo "deps: installing ${missing[*]}" >&2
apt-get update -q >&2
[ ${#others[@]} -gt 0 ] && apt-get install -y -q --no-install-recommends "${others[@]}" >&2
if $need_raft; then
  if [ "$release" = bookworm ]; then
    apt-get install -y -q --no-install-recommends -t bookworm-backports libraft-dev >&2
  else
    apt-get install -y -q --no-install-recommends libraft-dev >&2
  fi
  raft_ok || { echo "deps: libraft-dev >= $raft_min could not be installed" >&2; exit 1; }
fi
