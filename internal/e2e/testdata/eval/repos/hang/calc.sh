one() { echo 1; }
