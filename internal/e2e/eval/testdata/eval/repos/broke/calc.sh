double() { echo $1; }
half() { echo $(($1 / 2)); }
