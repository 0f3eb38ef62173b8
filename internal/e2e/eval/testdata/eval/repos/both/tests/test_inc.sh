. ./calc.sh
[ "$(inc 1)" = 2 ]
