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

# Installs the Debian packages named after $1 (what is missing, for the
# messages) and $2 (the Homebrew formula a Mac user needs instead); or, when
# nothing can be installed here without asking, says what to install and
# exits.
install_packages() {
  local what="$1" formula="$2"
  shift 2
  if ! can_install_packages; then
    say "$what is not installed. Install it, then run this again:"
    say "  Debian/Ubuntu: sudo apt-get install $*"
    say "  macOS:         brew install $formula"
    exit 1
  fi
  say "installing Debian's $* for $what"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@"
}

# True when the command $1 can be run: on PATH, or in the sbin folders a
# non-root PATH may lack (Debian installs nginx as /usr/sbin/nginx).
have_tool() {
  command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/sbin/$1" ]
}

# Makes sure every command named after the Debian package $1 and the
# Homebrew formula $2 can be run, installing the Debian package when that
# is possible.
ensure_package_tools() {
  local package="$1" formula="$2" missing="" tool
  shift 2
  for tool in "$@"; do
    have_tool "$tool" || missing="$missing $tool"
  done
  [ -z "$missing" ] && return 0
  install_packages "$package (missing:${missing})" "$formula" "$package"
  for tool in "$@"; do
    have_tool "$tool" || die "$tool is still missing after installing $package"
  done
}

# Makes sure every command named can be run, installing Debian's
# redis-server package (which brings redis-cli) when that is possible.
ensure_redis_tools() {
  ensure_package_tools redis-server redis "$@"
}

# Makes sure libfaketime can be preloaded (the fault schedule starts
# instances with a moved clock through it), installing Debian's faketime
# package, which brings the library and the `faketime` command, when that
# is possible.
ensure_faketime() {
  ensure_package_tools faketime libfaketime faketime
}

# Makes a Python virtual environment at $1 unless one is there. When
# python3, or its venv module with ensurepip (Debian ships those apart, in
# python3-venv), is missing, installs Debian's python3 and python3-venv
# first, when that is possible.
ensure_python_venv() {
  local venv="$1"
  [ -x "$venv/bin/python" ] && return 0
  mkdir -p "$(dirname "$venv")"
  if command -v python3 >/dev/null 2>&1 && python3 -m venv "$venv" >/dev/null 2>&1; then
    return 0
  fi
  rm -rf "$venv"
  install_packages "python3 with its venv module" python python3 python3-venv
  python3 -m venv "$venv" || die "python3 cannot make a virtual environment at $venv"
}

# Makes sure Node.js $1 or later and npm can be run, installing Debian's
# nodejs and npm when they are missing; stops when the node found (or
# installed) is older.
ensure_node() {
  local wanted="$1" major
  ensure_package_tools nodejs node node
  ensure_package_tools npm node npm
  major="$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)"
  [ "$major" -ge "$wanted" ] ||
    die "needs Node.js $wanted or later, found $(node --version 2>/dev/null || echo none); install a newer one (https://nodejs.org) and run this again"
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

# Prints the version of the Redis at host $1, port $2 (from INFO server),
# or nothing when it does not answer. bash's /dev/tcp again: no redis-cli.
redis_version() {
  local bound=()
  command -v timeout >/dev/null 2>&1 && bound=(timeout 3)
  # shellcheck disable=SC2016 # expanded by the inner bash
  ${bound[@]+"${bound[@]}"} bash -c '
    exec 3<>"/dev/tcp/$0/$1" || exit 1
    printf "INFO server\r\n" >&3
    while IFS= read -r -t 2 line <&3; do
      case "$line" in redis_version:*) line="${line#redis_version:}"; printf "%s\n" "${line%$(printf "\r")}"; exit 0 ;; esac
    done
    exit 1
  ' "$1" "$2" 2>/dev/null
}

# Stops with a clear message when the Redis at host $1, port $2 is older
# than 7.0: prioq keeps its logic in a Redis Functions library.
require_redis_7() {
  local version major
  version="$(redis_version "$1" "$2")" || return 0
  major="${version%%.*}"
  case "$major" in
    '' | *[!0-9]*) return 0 ;;
  esac
  if [ "$major" -lt 7 ]; then
    die "the Redis on $1:$2 is version $version; prioq needs Redis 7.0 or later (it loads a Redis Functions library). Upgrade it, or point PRIOQ_REDIS_URL at a Redis 7."
  fi
}

ensure_cargo() {
  command -v cargo >/dev/null 2>&1 ||
    die "needs the Rust toolchain (cargo); install it from https://rustup.rs and run this again"
}

# Builds the debug prioq and sets prioq_bin to it, wherever
# CARGO_TARGET_DIR puts cargo's output.
build_prioq() {
  say "building prioq (cargo build)"
  (cd "$prioq_root" && cargo build --quiet --bin prioq)
  local target_dir="${CARGO_TARGET_DIR:-target}"
  case "$target_dir" in
    /*) ;;
    *) target_dir="$prioq_root/$target_dir" ;;
  esac
  prioq_bin="$target_dir/debug/prioq"
  [ -x "$prioq_bin" ] || die "no prioq binary at $prioq_bin after cargo build"
}
