neg() { echo $1; }
abs() { [ "$1" -lt 0 ] && echo $((0 - $1)) || echo $1; }
