# Sourced by the test scripts: `need_commands CMD:PACKAGE...` installs, with apt-get, the
# Debian package of every command not on PATH (root only; otherwise it names them and fails).
need_commands() {
    local missing=() pair
    for pair in "$@"; do
        command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
    done
    [ ${#missing[@]} -gt 0 ] || return 0
    echo "== installing: ${missing[*]}"
    [ "$(id -u)" = 0 ] || { echo "not root: install ${missing[*]} first" >&2; return 1; }
    DEBIAN_FRONTEND=noninteractive apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
}
