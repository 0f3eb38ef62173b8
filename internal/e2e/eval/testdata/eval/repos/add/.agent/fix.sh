printf 'add() { echo $(($1 + $2)); }\n' > calc.sh
