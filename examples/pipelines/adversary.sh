#!/bin/sh
# Plays the adversary of review-loop.yaml: rejects work that has not answered
# a review yet (so the first round is rejected and the second approved), and
# delivers its verdict as the delivery's summary.
set -eu
if grep -q '^reviewed:' built.txt 2>/dev/null; then
	verdict='{"approved": true, "findings": []}'
else
	verdict='{"approved": false, "findings": [{"text": "built.txt does not say the work was reviewed", "file": "built.txt"}]}'
fi
exec drover tool deliver "$verdict"
