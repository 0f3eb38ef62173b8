package cluster

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/fleet"
	"drover/internal/testkit"
)

// BenchmarkFleetLaunchToConnected times `drover fleet launch` from its
// start to the hub seeing the runner connected (registration included;
// for ssh, the session, the tunnel and the check that drover is on the
// host, copied before the timed runs). The stop after each is not timed.
func BenchmarkFleetLaunchToConnected(b *testing.B) {
	for _, target := range []string{"local", "ssh"} {
		b.Run(target, func(b *testing.B) {
			hub := testkit.StartHub(b, bin)
			c := hub.Client()
			args := []string{"fleet", "launch", "--on", "local", "--json"}
			if target == "ssh" {
				sshd := testkit.StartSSHD(b)
				sshd.TrustHostKey(b)
				hosts := filepath.Join(b.TempDir(), "hosts.json")
				data, _ := json.Marshal(fleet.HostsFile{Hosts: []fleet.Host{{Name: "box", SSHHost: sshd.Alias, SSHConfig: sshd.ClientConfig}}})
				if err := os.WriteFile(hosts, data, 0o600); err != nil {
					b.Fatal(err)
				}
				args = []string{"fleet", "--hosts-file", hosts, "launch", "--on", "box", "--json"}
			}
			once := func() time.Duration {
				start := time.Now()
				out, err := hub.CLI(args...)
				if err != nil {
					b.Fatalf("launch: %v\n%s", err, out)
				}
				var lv apitypes.LaunchView
				if err := json.Unmarshal([]byte(out), &lv); err != nil {
					b.Fatal(err)
				}
				for {
					v, err := c.LaunchView(context.Background(), lv.ID)
					if err == nil && len(v.Runners) == 1 && v.Runners[0].Connected {
						break
					}
					time.Sleep(5 * time.Millisecond)
				}
				d := time.Since(start)
				if out, err := hub.CLI(append(args[:len(args)-4:len(args)-4], "stop", lv.ID)...); err != nil {
					b.Fatalf("stop: %v\n%s", err, out)
				}
				return d
			}
			once() // warm: for ssh, copies drover to the host
			b.ResetTimer()
			var total time.Duration
			for range b.N {
				total += once()
			}
			b.StopTimer()
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/connected")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkAutoscaleQueuedToAgentStarted times, under `drover fleet
// autoscale --on local --min 0`, a job submitted on an empty fleet to its
// agent starting (the attempt's start as the hub recorded it, minus the
// job's creation): the queue event, the launch, the registration, the
// connect and the offer. After each the fleet goes back to zero (--idle
// 1s), untimed.
func BenchmarkAutoscaleQueuedToAgentStarted(b *testing.B) {
	hub := testkit.StartHub(b, bin)
	c := hub.Client()
	hub.StartCLI(b, "fleet", "autoscale", "--on", "local", "--min", "0", "--max", "1", "--labels", "pool=bench", "--idle", "1s")
	ctx := context.Background()
	empty := func() {
		for {
			rs, err := c.Runners(ctx)
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for _, r := range rs.Runners {
				if r.Connected {
					n++
				}
			}
			if n == 0 {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	var total time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		empty()
		b.StartTimer()
		v, _, err := c.Submit(ctx, apitypes.SubmitRequest{Agent: "exec", Args: []string{"true"}, Labels: map[string]string{"pool": "bench"}})
		if err != nil {
			b.Fatal(err)
		}
		done := testkit.WaitJob(b, c, v.ID, time.Minute, func(v apitypes.JobView) bool {
			return len(v.Attempts) == 1 && v.Attempts[0].StartedAt != nil
		})
		total += done.Attempts[0].StartedAt.Sub(done.CreatedAt)
	}
	b.StopTimer()
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/started")
	b.ReportMetric(0, "ns/op")
}
