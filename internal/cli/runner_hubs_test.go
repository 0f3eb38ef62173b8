package cli

import (
	"strings"
	"testing"
)

// TestHubListIsChecked: `drover runner --hub` takes a list and refuses a
// bad one before anything starts; client commands take one hub and say so.
func TestHubListIsChecked(t *testing.T) {
	home := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"runner", "--hub", "http://a:1,http://A:1/", "--home", home}, "listed twice"},
		{[]string{"runner", "--hub", "http://a:1,,http://b:1", "--home", home}, "entry 2 is empty"},
		{[]string{"runner", "--hub", "http://a:1,ftp://b", "--home", home}, "scheme must be http or https"},
		{[]string{"jobs", "--hub", "http://a:1,http://b:1"}, "only `drover runner --hub` takes a list"},
	} {
		res := runCLI(t, nil, "", tc.args...)
		if res.code == 0 || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("drover %s: code %d, stderr %q; want an error with %q", strings.Join(tc.args, " "), res.code, res.stderr, tc.want)
		}
	}
}
