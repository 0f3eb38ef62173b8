sub() { echo $(($1 + $2)); }
