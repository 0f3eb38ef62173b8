. ./text.sh
[ "$(rev2 ab)" = ba ] || { echo "rev2 ab gave $(rev2 ab)"; exit 1; }
