package hub

import (
	"regexp"
	"testing"

	"drover/internal/protocol"
)

// The dashboard of any hub shows a runner connected to another hub on the
// database as online, on its runners page and in its accounts, as the
// runners API does; once it leaves, as offline.
func TestCrossHubDashboardShowsRunnersOfOtherHubs(t *testing.T) {
	t.Parallel()
	_, ths := pgHubs(t, 2, hubsConfig())
	a, b := ths[0], ths[1]
	tok := a.registerRunner("r1")
	sr, w := b.dial(tok, protocol.Hello{Slots: 1, Accounts: []protocol.AccountInfo{
		{ID: "acct_1", Agent: "claude", Kind: "api-key", State: protocol.AccountReady}}})
	web := a.browser()
	web.signIn(a.admin)
	state := regexp.MustCompile(`(?s)id="runner-r1">.*?<td class="state">(.*?)</td>`)
	pageState := func() string {
		t.Helper()
		resp, body := web.do("GET", "/runners", nil, nil)
		m := state.FindStringSubmatch(body)
		if resp.StatusCode != 200 || m == nil {
			t.Fatalf("runners page on hub A: %d\n%s", resp.StatusCode, body)
		}
		return m[1]
	}
	accountConnected := func() bool {
		t.Helper()
		vs := a.accounts(a.admin)
		if len(vs) != 1 {
			t.Fatalf("accounts on hub A: %+v", vs)
		}
		return vs[0].Connected
	}
	if got := pageState(); !regexp.MustCompile(`>online<`).MatchString(got) {
		t.Fatalf("hub A's runners page shows a runner on hub B as %q", got)
	}
	if !accountConnected() {
		t.Fatal("hub A's accounts show the account of a runner on hub B as disconnected")
	}
	sr.ws.CloseNow()
	waitFor(t, "B releases the runner", func() bool { return a.holder(w.RunnerID) == "" })
	if got := pageState(); !regexp.MustCompile(`>offline<`).MatchString(got) {
		t.Fatalf("hub A's runners page shows a runner that left as %q", got)
	}
	if accountConnected() {
		t.Fatal("hub A's accounts show the account of a runner that left as connected")
	}
}
