package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"drover/internal/sandbox"
)

func TestRunnerDoctor(t *testing.T) {
	r := runCLI(t, nil, "", "runner", "doctor", "--json")
	if r.code != 0 {
		t.Fatalf("doctor --json: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var checks []sandbox.Check
	if err := json.Unmarshal([]byte(r.stdout), &checks); err != nil {
		t.Fatalf("doctor --json printed %q: %v", r.stdout, err)
	}
	kinds := map[string]bool{}
	for _, c := range checks {
		kinds[c.Kind] = c.OK
	}
	if !kinds["bwrap"] || !kinds["none"] {
		t.Fatalf("checks = %+v", checks)
	}
	if _, ok := kinds["git"]; !ok {
		t.Fatalf("no git check: %+v", checks)
	}

	r = runCLI(t, nil, "", "runner", "doctor")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "CHECK") || !strings.Contains(r.stdout, "bwrap") {
		t.Fatalf("doctor: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// No container engine works on this project's machines.
	if !kinds["docker"] {
		r = runCLI(t, nil, "", "runner", "doctor", "--sandbox", "docker")
		if r.code != 1 || !strings.Contains(r.stderr, "--sandbox docker does not work here") {
			t.Fatalf("doctor --sandbox docker: exit %d\n%s", r.code, r.stderr)
		}
	}
}

func TestSandboxFlagsAreChecked(t *testing.T) {
	for _, args := range [][]string{
		{"runner", "--sandbox", "chroot"},
		{"up", "--sandbox", "lxc"},
		{"runner", "--sandbox-image", "alpine"},
		{"runner", "--images", "a/*"},
		{"runner", "--sandbox", "podman", "--images", "a/*,-x*"},
	} {
		if r := runCLI(t, nil, "", args...); r.code != 2 || !strings.Contains(r.stderr, "--sandbox") && !strings.Contains(r.stderr, "--images") {
			t.Errorf("%q: exit %d, %s", args, r.code, r.stderr)
		}
	}
}

func TestSandboxInitRunsTheCommand(t *testing.T) {
	r := runCLI(t, nil, "", "sandbox-init", "--", "sh", "-c", "exit 7")
	if r.code != 7 {
		t.Fatalf("sandbox-init: exit %d, %s", r.code, r.stderr)
	}
	if r := runCLI(t, nil, "", "sandbox-init", "--bridge", "nonsense", "--", "true"); r.code == 0 {
		t.Fatal("a bad bridge was accepted")
	}
}

// The doctor checks a runner's --labels by the hub's rule and names each
// label the hub would refuse, and why.
func TestRunnerDoctorNamesBadLabels(t *testing.T) {
	labelsOf := func(r cliResult) sandbox.Check {
		t.Helper()
		var checks []sandbox.Check
		if err := json.Unmarshal([]byte(r.stdout), &checks); err != nil {
			t.Fatalf("doctor --json printed %q: %v", r.stdout, err)
		}
		for _, c := range checks {
			if c.Kind == "labels" {
				return c
			}
		}
		t.Fatalf("no labels check: %+v", checks)
		return sandbox.Check{}
	}
	r := runCLI(t, nil, "", "runner", "doctor", "--sandbox", "none", "--json", "--labels", "zone=lab,gpu:x=1,note=a\x1bb")
	c := labelsOf(r)
	if r.code != 1 || c.OK || !strings.Contains(c.Detail, `label key "gpu:x"`) || !strings.Contains(c.Detail, "the value of label note has a control character") ||
		strings.Contains(c.Detail, "zone") || c.Fix == "" || !strings.Contains(r.stderr, `gpu:x`) {
		t.Fatalf("doctor --labels with bad ones: exit %d, %+v\n%s", r.code, c, r.stderr)
	}
	r = runCLI(t, nil, "", "runner", "doctor", "--sandbox", "none", "--json", "--labels", "zone=lab,gpu=a100")
	if c := labelsOf(r); r.code != 0 || !c.OK || c.Detail != "2 labels: gpu=a100,zone=lab" {
		t.Fatalf("doctor --labels with good ones: exit %d, %+v\n%s", r.code, c, r.stderr)
	}
}
