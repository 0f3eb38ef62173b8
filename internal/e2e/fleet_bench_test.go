package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"drover/internal/fleet"
	"drover/internal/protocol"
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
				var lv protocol.LaunchView
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
