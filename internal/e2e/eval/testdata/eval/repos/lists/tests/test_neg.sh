. ./calc.sh
[ "$(neg 4)" = -4 ]
