#!/bin/sh
# Plays the adversary of review-loop.yaml: rejects its first round with one
# finding and approves the second, delivering the verdict (its JSON as the delivery's summary).
set -eu
round=$(( $(cat .review-round 2>/dev/null || echo 0) + 1 ))
printf '%s\n' "$round" >.review-round
if [ "$round" -lt 2 ]; then
	verdict='{"approved": false, "findings": [{"text": "built.txt does not say the work was reviewed", "file": "built.txt"}]}'
else
	verdict='{"approved": true, "findings": []}'
fi
exec drover tool deliver "$verdict"
