. ./calc.sh
[ "$(abs -4)" = 4 ]
