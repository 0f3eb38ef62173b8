upper() { printf '%s\n' "$1"; }
