printf 'mul() { echo $(($1 * $2)); }\n' > calc.sh
