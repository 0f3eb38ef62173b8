printf 'rev2() { printf "%%s%%s\\n" "$1" "$1"; }\n' > text.sh
