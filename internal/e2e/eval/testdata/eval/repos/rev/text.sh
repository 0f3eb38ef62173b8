rev2() { printf '%s\n' "$1"; }
