# Sourced by the test, showcase and bench scripts: `need_commands CMD:PACKAGE...` installs,
# with apt-get, the Debian package of every command not on PATH, and `need_packages
# PACKAGE...` every Debian package not installed (root only; otherwise they name them and
# fail). `missing_for_commands` and `missing_packages` only print those packages, one per
# line, for a script that installs both kinds in one `apt_install`.
missing_for_commands() {
    local pair
    for pair in "$@"; do
        command -v "${pair%%:*}" >/dev/null 2>&1 || echo "${pair#*:}"
    done
}

missing_packages() {
    local p
    command -v dpkg-query >/dev/null 2>&1 || return 0 # not Debian: left to the build to report
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
            echo "$p"
    done
}

need_commands() {
    # shellcheck disable=SC2046 # package names: one word each
    apt_install $(missing_for_commands "$@")
}

need_packages() {
    # shellcheck disable=SC2046
    apt_install $(missing_packages "$@")
}

# Install PACKAGE... (each once) with apt-get; nothing to do without arguments. APT_QUIET=1
# keeps apt-get's own output off the terminal.
apt_install() {
    [ $# -gt 0 ] || return 0
    # shellcheck disable=SC2046
    set -- $(printf '%s\n' "$@" | sort -u)
    echo "== installing: $*"
    [ "$(id -u)" = 0 ] || { echo "not root: install $* first" >&2; return 1; }
    export DEBIAN_FRONTEND=noninteractive
    if [ "${APT_QUIET:-0}" = 1 ]; then
        apt-get update -qq && apt-get install -y -qq --no-install-recommends "$@" >/dev/null
    else
        apt-get update && apt-get install -y --no-install-recommends "$@"
    fi
}
