. ./text.sh
[ "$(upper abc)" = ABC ] || { echo "upper abc gave $(upper abc)"; exit 1; }
