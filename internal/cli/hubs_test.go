package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
)

func TestHubsListsLiveHubsAndTheLeader(t *testing.T) {
	h := newFakeHub(t)
	started := time.Date(2030, 1, 2, 3, 4, 0, 0, time.Local)
	h.mu.Lock()
	h.hubs = []apitypes.HubView{
		{ID: "h-1", URL: "https://hub1.example", Version: "v1.2.0", StartedAt: started, LastSeen: time.Now(), Conns: 12, Leader: true},
		{ID: "h-2", URL: "https://hub2.example/\x1b[31m", Version: "v1.2.0", StartedAt: started, LastSeen: time.Now(), Conns: 3, Self: true},
		{ID: "h-3", Version: "v1.3.0", StartedAt: started, LastSeen: time.Now()},
	}
	h.mu.Unlock()
	env := map[string]string{"DROVER_HUB": h.URL, "DROVER_TOKEN": h.token}
	r := runCLI(t, env, "", "hubs")
	if r.code != 0 {
		t.Fatalf("hubs: code %d, stderr %q", r.code, r.stderr)
	}
	if strings.Contains(r.stdout, "\x1b") {
		t.Fatalf("a hub's URL reached the terminal unescaped: %q", r.stdout)
	}
	got := rows(r.stdout)
	want := [][]string{
		{"ID", "URL", "VERSION", "CONNECTIONS", "ROLE", "STARTED", "LAST", "SEEN"},
		{"h-1", "https://hub1.example", "v1.2.0", "12", "leader", "2030-01-02", "03:04"},
		{"h-2", "*", "https://hub2.example/\\x1b[31m", "v1.2.0", "3", "follower", "2030-01-02", "03:04"},
		{"h-3", "-", "v1.3.0", "0", "follower", "2030-01-02", "03:04"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(got), len(want), r.stdout)
	}
	for i, w := range want {
		g := got[i]
		if i > 0 { // the last seen age ("0s ago") depends on when the test runs
			if len(g) < 2 || g[len(g)-1] != "ago" {
				t.Fatalf("line %d: %q ends without an age", i, g)
			}
			g = g[:len(g)-2]
		}
		if strings.Join(g, " ") != strings.Join(w, " ") {
			t.Errorf("line %d: %q, want %q", i, g, w)
		}
	}
	r = runCLI(t, env, "", "hubs", "--json")
	var l apitypes.HubList
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil || len(l.Hubs) != 3 || !l.Hubs[0].Leader || l.Hubs[0].Conns != 12 {
		t.Fatalf("hubs --json printed %q: %v", r.stdout, err)
	}
}
