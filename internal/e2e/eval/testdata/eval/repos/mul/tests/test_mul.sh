. ./calc.sh
[ "$(mul 3 4)" = 12 ] || { echo "mul 3 4 gave $(mul 3 4), want 12"; exit 1; }
