# The scripted agent of the evaluation test: it does what the instance's
# repository planted in .agent/fix.sh (nothing when there is none). The
# problem statement is $1.
set -eu
[ -n "$1" ]
if [ -f .agent/fix.sh ]; then
	sh .agent/fix.sh
fi
