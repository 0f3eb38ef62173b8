#!/bin/sh
# Plays the builder of review-loop.yaml: writes the goal into a file, and on
# later rounds adds a line for the adversary's last finding.
set -eu
goal=${1:?usage: builder.sh GOAL [BASE]}
printf '%s\n' "$goal" >>built.txt
if [ -f .review-round ]; then
	printf 'fixed round %s\n' "$(cat .review-round)" >>built.txt
fi
