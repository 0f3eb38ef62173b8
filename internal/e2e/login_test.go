package e2e

import (
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/e2e/e2ekit"
	"drover/internal/job"
	"drover/internal/testkit"
)

// A login approved under another name takes that name; over a name in use
// it is refused until --replace, which cuts the old runner off.
func TestRunnerLoginIntegrity(t *testing.T) {
	t.Parallel()
	hub := testkit.StartHub(t, bin)
	c := hub.Client()
	old := hub.StartRunner(t, "gpu1")

	var refused, replaced string
	r := hub.LoginRunnerWith(t, "gpu2", hub.URL, func(link string) {
		edited := strings.Replace(link, "name=gpu2", "name=gpu1", 1)
		out, err := hub.CLI("runner", "approve", edited)
		if err == nil {
			t.Fatalf("approving over a live runner's name without --replace succeeded:\n%s", out)
		}
		refused = out
		if out, err = hub.CLI("runner", "approve", "--replace", edited); err != nil {
			t.Fatalf("approve --replace: %v\n%s", err, out)
		}
		replaced = out
	})
	if !strings.Contains(refused, `"gpu1" is taken`) || !strings.Contains(refused, "--replace") {
		t.Errorf("refusal does not say the name is taken and what --replace does:\n%s", refused)
	}
	if !strings.Contains(replaced, "revoked the old runner gpu1") {
		t.Errorf("approve --replace does not say it revoked the old runner:\n%s", replaced)
	}
	if r.Name != "gpu1" {
		t.Fatalf("the runner saved name %q, the hub approved gpu1", r.Name)
	}
	if err := old.Wait(2 * time.Minute); err == nil || !strings.Contains(old.Output(), "revoked") {
		t.Fatalf("the replaced runner did not stop as revoked: %v\n%s", err, old.Output())
	}

	r.Start()
	j := e2ekit.Submit(t, c, "true")
	testkit.WaitJob(t, c, j.ID, time.Minute, testkit.InState(job.Completed))
	if n := e2ekit.ClaimsOf(r)[j.ID]; n != 1 {
		t.Fatalf("the new runner claimed the job %d times", n)
	}
	out, err := hub.CLI("runners", "--json")
	var l apitypes.RunnerList
	if err != nil || json.Unmarshal([]byte(out), &l) != nil {
		t.Fatalf("runners: %v\n%s", err, out)
	}
	if len(l.Runners) != 1 || l.Runners[0].Name != "gpu1" || !l.Runners[0].Connected {
		t.Fatalf("runners %+v, want gpu1 connected, alone", l.Runners)
	}
}

func TestRunnerLoginToNoHubFails(t *testing.T) {
	t.Parallel()
	hub := testkit.StartHub(t, bin)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	out, err := hub.CLI("runner", "login", "--hub", closed, "--name", "r", "--home", filepath.Join(t.TempDir(), "r"))
	if err == nil || !strings.Contains(out, closed+"/api/v1/runner/login") || strings.Contains(out, "approve") {
		t.Fatalf("login to a closed port: %v\n%s", err, out)
	}
}
