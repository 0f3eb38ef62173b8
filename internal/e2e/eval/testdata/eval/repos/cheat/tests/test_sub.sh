. ./calc.sh
[ "$(sub 5 3)" = 2 ] || { echo "sub 5 3 gave $(sub 5 3), want 2"; exit 1; }
