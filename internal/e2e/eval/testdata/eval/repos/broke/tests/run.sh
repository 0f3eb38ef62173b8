. ./calc.sh
case $1 in
double) [ "$(double 4)" = 8 ] ;;
half) [ "$(half 8)" = 4 ] ;;
*) echo "no test $1"; exit 2 ;;
esac
