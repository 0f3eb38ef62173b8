package chaos_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"drover/internal/chaos"
	"drover/internal/testkit"
	"drover/internal/testkit/ciskip"
)

// bin is the drover binary built once for this package by TestMain.
var bin string

func TestMain(m *testing.M) { testkit.MainWithBinary(m, &bin, testkit.RaceBinary) }

// shortCampaign runs the CI campaign (about a minute) with the hub's state
// in db ("": SQLite) and fails with the seed and the command that replays
// it.
func shortCampaign(t *testing.T, seed uint64, db string) { shortCampaignOn(t, seed, db, 1) }

// shortCampaignOn is shortCampaign with hubs hub processes on db.
func shortCampaignOn(t *testing.T, seed uint64, db string, hubs int) {
	if testing.Short() {
		ciskip.Skipf(t, "-short: a fault campaign takes a minute")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		ciskip.Skipf(t, "runners need bwrap: %v", err)
	}
	// A campaign mostly waits out its fixed duration and settle (a quarter
	// to a half of a core, session 21): the four run side by side, each
	// with its own processes, directory, ports and database.
	t.Parallel()
	// A failed campaign keeps its files (the hubs' and runners' logs, the
	// campaign's own): a flake under load is diagnosed from them.
	dir, err := os.MkdirTemp("", "drover-chaos-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			os.RemoveAll(dir)
		}
	})
	o := chaos.Options{Binary: bin, Dir: dir, Seed: seed, Jobs: 40, Runners: 3, Slots: 2,
		Duration: 35 * time.Second, Settle: 2 * time.Minute, DB: db, Hubs: hubs}
	replay := "drover chaos --seed " + strconv.FormatUint(seed, 10) + " --jobs 40 --runners 3 --slots 2 --duration 35s"
	if db != "" {
		replay += " --db POSTGRES_URL"
	}
	if hubs > 1 {
		replay += " --hubs " + strconv.Itoa(hubs)
	}
	t.Logf("campaign seed %d (replay: %s)", seed, replay)
	var progress bytes.Buffer
	o.Progress = &progress
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := chaos.Run(ctx, o)
	if err != nil {
		t.Fatalf("campaign with seed %d could not run: %v\n%s(replay: %s; files kept in %s)", seed, err, progress.String(), replay, dir)
	}
	var sum bytes.Buffer
	res.WriteSummary(&sum)
	t.Logf("\n%s", sum.String())
	if !res.OK() {
		t.Fatalf("campaign with seed %d broke drover's promises (replay: %s; files kept in %s):\n%s", seed, replay, dir, sum.String())
	}
	if res.Outcomes["completed"] == 0 {
		t.Fatalf("campaign with seed %d completed no job (replay: %s)", seed, replay)
	}
}

// TestCampaignFixedSeed runs the same planned campaign every time.
func TestCampaignFixedSeed(t *testing.T) { shortCampaign(t, 20261201, "") }

// TestCampaignRandomSeed runs a new one each time; its seed is logged, and
// in the failure message.
func TestCampaignRandomSeed(t *testing.T) { shortCampaign(t, chaos.NewSeed(), "") }

// TestCampaignOnPostgres runs the fixed campaign against a hub on
// Postgres, checked through the same store interface.
func TestCampaignOnPostgres(t *testing.T) { shortCampaign(t, 20261201, testkit.StartPostgres(t)) }

// TestCampaignOnThreeHubs runs the fixed campaign against three hubs on
// one Postgres, the runners given all three and the hub faults spread
// over them, checked by the same checker.
func TestCampaignOnThreeHubs(t *testing.T) {
	shortCampaignOn(t, 20261201, testkit.StartPostgres(t), 3)
}
