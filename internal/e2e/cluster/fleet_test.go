package cluster

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/fleet"
	"drover/internal/job"
	"drover/internal/testkit"
)

func TestFleetLocalLaunchRunsJobsAndStopLeavesNothing(t *testing.T) {
	t.Parallel()
	hub := testkit.StartHub(t, bin)
	c := hub.Client()

	// Bad input launches nothing and mints nothing.
	if out, err := hub.CLI("fleet", "launch", "--on", "nowhere"); err == nil || !strings.Contains(out, `unknown fleet target "nowhere": use --on with one of local`) {
		t.Fatalf("unknown target: %v\n%s", err, out)
	}
	if out, err := hub.CLI("fleet", "launch", "--on", "kubernetes", "--image", "registry.example/drover:1"); err == nil ||
		!strings.Contains(out, "the kubernetes target needs a cluster config: pass --kubeconfig FILE, set $KUBECONFIG") {
		t.Fatalf("no cluster config: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if l, err := c.Launches(ctx); err != nil || len(l.Launches) != 0 {
		t.Fatalf("launches after a refused launch: %+v %v", l, err)
	}

	out, err := hub.CLI("fleet", "launch", "--on", "local", "--count", "2", "--labels", "pool=e2e", "--json")
	if err != nil {
		t.Fatalf("launch: %v\n%s", err, out)
	}
	var lv apitypes.LaunchView
	if err := json.Unmarshal([]byte(out), &lv); err != nil {
		t.Fatalf("launch output: %v\n%s", err, out)
	}
	if strings.Contains(out, "drv_g_") {
		t.Fatal("the launch printed a registration token")
	}
	waitLaunch(t, c, lv.ID, func(v apitypes.LaunchView) bool {
		return len(v.Runners) == 2 && v.Runners[0].Connected && v.Runners[1].Connected
	})
	if out, err := hub.CLI("fleet", "list"); err != nil || strings.Count(out, "connected") != 2 || !strings.Contains(out, lv.ID) {
		t.Fatalf("fleet list: %v\n%s", err, out)
	}
	pids := hub.FleetPIDs("local")
	if len(pids) != 2 {
		t.Fatalf("pids: %v", pids)
	}
	// Each runner has its own login (0600) in its own 0700 home, and the
	// used token is gone.
	for _, r := range lv.Runners {
		dir := filepath.Join(hub.FleetDir("local"), lv.ID, r.Name)
		if fi, err := os.Stat(filepath.Join(dir, "home")); err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("runner home: %v %v", fi, err)
		}
		if fi, err := os.Stat(filepath.Join(dir, "home", "login.json")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("runner login: %v %v", fi, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "registration")); !os.IsNotExist(err) {
			t.Fatalf("registration token file left: %v", err)
		}
	}

	v, _, err := c.Submit(ctx, apitypes.SubmitRequest{Agent: "exec", Args: []string{"echo", "from the fleet"}, Labels: map[string]string{"pool": "e2e"}})
	if err != nil {
		t.Fatal(err)
	}
	done := testkit.WaitJob(t, c, v.ID, time.Minute, testkit.InState(job.Completed))
	if !strings.HasPrefix(done.Attempts[0].Runner, lv.ID) {
		t.Fatalf("job ran on %q, not a launched runner", done.Attempts[0].Runner)
	}
	if out, err := hub.CLI("fleet", "logs", done.Attempts[0].Runner); err != nil || !strings.Contains(out, "connected to hub") {
		t.Fatalf("fleet logs: %v\n%s", err, out)
	}

	if out, err := hub.CLI("fleet", "stop", lv.ID); err != nil {
		t.Fatalf("stop: %v\n%s", err, out)
	}
	for _, pid := range pids {
		if fleet.GroupAlive(pid) {
			t.Errorf("runner process group %d outlived fleet stop", pid)
		}
	}
	rs, err := c.Runners(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs.Runners {
		if strings.HasPrefix(r.Name, lv.ID) && (!r.Revoked || r.Connected) {
			t.Errorf("runner %s after stop: revoked %v connected %v", r.Name, r.Revoked, r.Connected)
		}
	}
}

func waitLaunch(t *testing.T, c interface {
	LaunchView(context.Context, string) (apitypes.LaunchView, error)
}, id string, cond func(apitypes.LaunchView) bool) apitypes.LaunchView {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		v, err := c.LaunchView(context.Background(), id)
		if err == nil && cond(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("launch %s: %+v %v", id, v, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
