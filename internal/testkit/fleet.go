package testkit

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// FleetDir is where `drover fleet` run through Hub.CLI keeps the runners
// of the named target.
func (h *Hub) FleetDir(target string) string {
	return filepath.Join(h.home, ".local", "state", "drover", "fleet", target)
}

// FleetPIDs reads the process ids of every runner the local target
// started for this hub's CLI.
func (h *Hub) FleetPIDs() []int {
	h.t.Helper()
	files, err := filepath.Glob(filepath.Join(h.FleetDir("local"), "*", "*", "pid"))
	if err != nil {
		h.t.Fatal(err)
	}
	var pids []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			h.t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			h.t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	return pids
}
