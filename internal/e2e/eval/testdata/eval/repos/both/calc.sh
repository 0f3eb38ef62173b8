inc() { echo $1; }
