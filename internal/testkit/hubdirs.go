package testkit

import "testing"

// StartHubIn is StartHub with its data directory at data (e.g. on a
// Tmpfs).
func StartHubIn(t testing.TB, bin, data string, args ...string) *Hub {
	t.Helper()
	return startHub(t, bin, data, args)
}

// StartRunnerIn is StartRunner with the runner's home at home.
func (h *Hub) StartRunnerIn(t testing.TB, name, home string, args ...string) *Runner {
	t.Helper()
	r := h.loginRunnerAt(t, name, h.URL, home, func(link string) {
		if out, err := h.CLI("runner", "approve", link); err != nil {
			t.Fatalf("approve runner %s: %v\n%s", name, err, out)
		}
	})
	r.args = args
	r.Start()
	return r
}

// RestartWith stops the hub (SIGKILL) and starts it again on the same
// address and data directory with other flags (e.g. "--db", URL after a
// copy-db).
func (h *Hub) RestartWith(args ...string) {
	h.t.Helper()
	h.p.kill()
	h.args = args
	h.start()
}
