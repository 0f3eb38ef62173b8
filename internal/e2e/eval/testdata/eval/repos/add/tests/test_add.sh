. ./calc.sh
[ "$(add 2 3)" = 5 ] || { echo "add 2 3 gave $(add 2 3), want 5"; exit 1; }
