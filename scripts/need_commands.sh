# Sourced by the test and bench scripts: `need_commands CMD:PACKAGE...` installs, with
# apt-get, the Debian package of every command not on PATH, and `need_packages PACKAGE...`
# every Debian package not installed (root only; otherwise they name them and fail).
need_commands() {
    local missing=() pair
    for pair in "$@"; do
        command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
    done
    apt_install ${missing[@]+"${missing[@]}"}
}

need_packages() {
    local missing=() p
    command -v dpkg-query >/dev/null 2>&1 || return 0 # not Debian: left to the build to report
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
            missing+=("$p")
    done
    apt_install ${missing[@]+"${missing[@]}"}
}

apt_install() {
    [ $# -gt 0 ] || return 0
    echo "== installing: $*"
    [ "$(id -u)" = 0 ] || { echo "not root: install $* first" >&2; return 1; }
    DEBIAN_FRONTEND=noninteractive apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@"
}
