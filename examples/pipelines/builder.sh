#!/bin/sh
# Plays the builder of review-loop.yaml: writes the goal into built.txt; in a
# later round of the review loop, the review's verdict arrives as the
# context file feedback.json, and the builder answers it.
set -eu
goal=${1:?usage: builder.sh GOAL}
if [ -n "${DROVER_CONTEXT_DIR:-}" ] && [ -f "$DROVER_CONTEXT_DIR/feedback.json" ]; then
	printf 'reviewed: answered %s\n' "$(tr -d '\n' <"$DROVER_CONTEXT_DIR/feedback.json" | cut -c1-200)" >>built.txt
else
	printf '%s\n' "$goal" >>built.txt
fi
