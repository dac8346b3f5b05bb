# shellcheck shell=bash
# Helpers shared by scripts/run and scripts/test. Source it; do not run it.
# Written for bash 3.2 too, so it also works with macOS's /bin/bash.

# shellcheck disable=SC2034 # used by the scripts that source this file
prioq_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

say() {
  printf 'prioq: %s\n' "$*" >&2
}

die() {
  say "$*"
  exit 1
}

# Runs a command as root: directly when we are root, else through sudo,
# which must not ask for a password (scripts may run without a terminal).
as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  else
    sudo -n "$@"
  fi
}

# True when packages can be installed here without asking anyone.
can_install_packages() {
  command -v apt-get >/dev/null 2>&1 || return 1
  [ "$(id -u)" -eq 0 ] && return 0
  command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null
}

# Makes sure every command named is on PATH, installing Debian's
# redis-server package (which brings redis-cli) when that is possible.
ensure_redis_tools() {
  local missing="" tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
  done
  [ -z "$missing" ] && return 0
  if ! can_install_packages; then
    say "Redis is not installed (missing:${missing}). Install it, then run this again:"
    say "  Debian/Ubuntu: sudo apt-get install redis-server"
    say "  macOS:         brew install redis"
    exit 1
  fi
  say "installing Debian's redis-server package for${missing}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server
  for tool in "$@"; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool is still missing after installing redis-server"
  done
}

# True when a Redis at host $1, port $2 answers PING. Uses bash's /dev/tcp,
# so it needs neither redis-cli nor nc.
redis_answers() {
  local bound=()
  command -v timeout >/dev/null 2>&1 && bound=(timeout 3)
  # shellcheck disable=SC2016 # expanded by the inner bash
  ${bound[@]+"${bound[@]}"} bash -c '
    exec 3<>"/dev/tcp/$0/$1" || exit 1
    printf "PING\r\n" >&3
    IFS= read -r -t 2 reply <&3 || exit 1
    case "$reply" in +PONG*) exit 0 ;; *) exit 1 ;; esac
  ' "$1" "$2" 2>/dev/null
}

ensure_cargo() {
  command -v cargo >/dev/null 2>&1 ||
    die "needs the Rust toolchain (cargo); install it from https://rustup.rs and run this again"
}
