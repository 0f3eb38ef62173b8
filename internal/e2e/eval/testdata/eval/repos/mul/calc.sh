mul() { echo $(($1 + $2)); }
