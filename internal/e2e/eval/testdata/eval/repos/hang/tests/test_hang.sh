while :; do sleep 1; done
