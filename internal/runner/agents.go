package runner

import (
	"crypto/rand"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"drover/internal/accounts"
	"drover/internal/agent"
	agentexec "drover/internal/agent/exec"
	"drover/internal/agent/facts"
	"drover/internal/job"
	"drover/internal/protocol"
)

// Agents are the implementations of the agents a runner runs, keyed by
// the names of package facts (package catalog has them; the runner's
// command builds them). Every agent is registered, even a CLI that is not
// installed (a job naming it fails with that reason), but only those
// Available are reported to the hub, which offers no job to the others.
type Agents interface {
	Lookup(name string) (agent.Agent, bool)
	Names() []string
	// Available says whether the agent can run here: a vendor CLI must be
	// installed.
	Available(name string) error
	// LoggedIn is a LoginCheck.
	LoggedIn(name, dir string, now time.Time) error
}

// LoginCheck says, without the network, whether dir, a login account's
// config directory, holds the vendor login of the agent called name: an
// error when it is missing or expired; nil when it is there or cannot be
// told (package catalog's LoggedIn).
type LoginCheck func(name, dir string, now time.Time) error

// AccountState is what is true of an account at now, the one rule for the
// runner, its listing and the doctor: "needs attention" (its provider
// refused it), "needs login" (a login account whose vendor login is
// missing or expired in dir, its config directory, as loggedIn reads it),
// "limited", else "ready". Fix is the command that makes it ready again,
// why what is wrong; both are empty when it is ready.
func AccountState(loggedIn LoginCheck, acct accounts.Account, dir string, now time.Time) (state, why, fix string) {
	switch {
	case acct.NeedsAttention():
		return protocol.AccountNeedsAttention, acct.Attention, attentionFix(acct)
	case acct.Kind == accounts.KindLogin:
		if err := loggedIn(acct.Agent, dir, now); err != nil {
			return protocol.AccountNeedsLogin, err.Error(), "drover runner account login " + acct.ID
		}
	}
	if acct.Limited(now) {
		return protocol.AccountLimited, acct.LimitMessage, ""
	}
	return protocol.AccountReady, "", ""
}

// usable says whether an account may run a job at now.
func (r *Runner) usable(acct accounts.Account, now time.Time) bool {
	st, _, _ := AccountState(r.agents.LoggedIn, acct, r.accts.Dir(acct.ID), now)
	return st == protocol.AccountReady
}

// agentsLocked is what the runner can run now: exec, and each installed
// CLI with a ready account (see AccountState). It arms a timer for the first
// limit to run out, so the hub hears when an agent is back.
func (r *Runner) agentsLocked() ([]string, []protocol.AccountInfo) {
	now := r.now()
	names := []string{agentexec.Name}
	list, err := r.accts.List()
	if err != nil {
		r.log.Warn("read accounts", "err", err)
	}
	var infos []protocol.AccountInfo
	ready := map[string]bool{}
	var next time.Time
	for _, acct := range list {
		st, _, _ := AccountState(r.agents.LoggedIn, acct, r.accts.Dir(acct.ID), now)
		info := protocol.AccountInfo{ID: acct.ID, Agent: acct.Agent, Label: acct.Label, Kind: acct.Kind, State: st}
		switch st {
		case protocol.AccountLimited:
			info.LimitedUntil = acct.LimitedUntil
			if next.IsZero() || acct.LimitedUntil.Before(next) {
				next = acct.LimitedUntil
			}
		case protocol.AccountReady:
			ready[acct.Agent] = true
		}
		if len(infos) < protocol.MaxAccounts {
			infos = append(infos, info)
		}
	}
	for _, e := range facts.All() {
		if !e.Accounts() || !ready[e.Name] {
			continue
		}
		if err := r.agents.Available(e.Name); err == nil {
			names = append(names, e.Name)
		}
	}
	r.reported = infos
	if r.loginTimer == nil && slices.ContainsFunc(infos, needsFix) {
		r.loginTimer = time.AfterFunc(loginRecheck, r.recheckLogins)
	}
	if !next.IsZero() {
		if r.limitTimer != nil {
			r.limitTimer.Stop()
		}
		r.limitTimer = time.AfterFunc(next.Sub(now)+time.Second, func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.markDirtyLocked()
		})
	}
	return names, infos
}

// loginRecheck is how often a runner looks whether an account that needs a
// login or attention was fixed (a few file reads).
const loginRecheck = 15 * time.Second

// needsFix says whether a reported account waits for its owner.
func needsFix(i protocol.AccountInfo) bool {
	return i.State == protocol.AccountNeedsLogin || i.State == protocol.AccountNeedsAttention
}

// recheckLogins marks the status dirty when an account reported as needing
// a login or attention no longer does (its owner logged in, or reset it
// with 'drover runner account reset' in another process): the hub then
// offers it jobs.
func (r *Runner) recheckLogins() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loginTimer = nil
	now := r.now()
	for _, info := range r.reported {
		if !needsFix(info) {
			continue
		}
		acct, err := r.accts.Get(info.ID)
		if st, _, _ := AccountState(r.agents.LoggedIn, acct, r.accts.Dir(info.ID), now); err != nil || st != info.State {
			r.markDirtyLocked()
			return
		}
	}
	r.loginTimer = time.AfterFunc(loginRecheck, r.recheckLogins)
}

// sessionRef ties a session to the account it lives in: a session can only
// be resumed from the same account's config directory.
func sessionRef(acct, session string) string {
	if session == "" {
		return ""
	}
	return acct + "/" + session
}

// runWithAccount runs an agent that runs under an account (a vendor CLI,
// native): it picks the account (the one holding the session when resuming
// it), builds the prompt, and sits the account out when the agent reports a
// limit, releasing the job to the queue.
func (r *Runner) runWithAccount(a *attempt, c agent.Agent, e facts.Agent, att agent.Attempt) (agent.Result, error) {
	sp := att.Output
	acct, resume, err := r.pickAccount(a, e)
	if err != nil {
		fmt.Fprintf(sp, "drover: %v; the job goes back to the queue\n", err)
		r.markDirty()
		return agent.Result{ExitCode: -1, Reason: job.ReasonLimited, Message: clip(err.Error(), 1024)}, nil
	}
	if att.Account, err = r.agentAccount(acct); err != nil {
		return agent.Result{}, err
	}
	if fb := a.spec.Fallback; fb != "" && fb != acct.ID {
		// The hub's choice of the job's fallback here, while it is ready.
		if f, err := r.accts.Get(fb); err == nil && f.Agent == c.Name() && r.usable(f, r.now()) {
			if att.Fallback, err = r.agentAccount(f); err != nil {
				return agent.Result{}, err
			}
		}
	}
	home := r.homePath(a.ref.Attempt)
	if err := freshDir(home); err != nil {
		return agent.Result{}, fmt.Errorf("make the agent's home: %w", err)
	}
	prompt, err := r.cliPrompt(a, e, resume != "")
	if err != nil {
		return agent.Result{ExitCode: -1, Reason: job.ReasonSpawnFailed, Message: err.Error()}, nil
	}
	att.Prompt, att.Home, att.Resume = prompt, home, resume
	if resume == "" {
		att.NewSession = newUUID()
	}
	how := "a new session"
	if resume != "" {
		how = "session " + resume
	}
	fmt.Fprintf(sp, "drover: running %s with account %s, %s\n", c.Name(), acctName(acct), how)
	r.accountLimits(a, acct)
	res, err := c.Run(a.ctx, att)
	if err == nil && resume != "" && res.Reason == job.ReasonExited && res.ExitCode != 0 && res.Session == "" &&
		res.Limit == nil && a.ctx.Err() == nil {
		// The CLI failed before it even named its session: it could not
		// resume it (a CLI killed early may lose one). Start afresh, with
		// the job's history in the prompt, rather than fail the job.
		fmt.Fprintf(sp, "drover: %s could not resume session %s; starting a new session\n", c.Name(), resume)
		if att.Prompt, err = r.cliPrompt(a, e, false); err != nil {
			return agent.Result{ExitCode: -1, Reason: job.ReasonSpawnFailed, Message: err.Error()}, nil
		}
		att.Resume, att.NewSession = "", newUUID()
		res, err = c.Run(a.ctx, att)
	}
	if err != nil {
		return res, err
	}
	if !e.Caps.Portable {
		res.Session = sessionRef(acct.ID, res.Session)
	}
	if f := res.Found; f != nil {
		r.learned(acct, *f)
	}
	if refusesAccount(res.Reason) && (res.Reason != job.ReasonModelNotFound || a.spec.Model == "") {
		// (A model the job named is the job's, not the account's.)
		// The provider refused the account, or its model server the
		// account's model or endpoint: the same would happen to every job,
		// so it runs nothing more until its owner fixes it.
		if err := r.accts.SetAttention(acct.ID, string(res.Reason), res.Message); err != nil {
			r.log.Error("mark account as needing attention", "account", acct.ID, "err", err)
		}
		r.markDirty()
		r.log.Warn("account refused", "account", acct.ID, "agent", c.Name(), "reason", res.Reason)
		acct.Refused = string(res.Reason)
		res.Message = clip(fmt.Sprintf("account %s: %s; it needs attention: %s", acctName(acct), res.Message, attentionFix(acct)), 1024)
		fmt.Fprintf(sp, "drover: %s\n", res.Message)
	}
	if u := res.Usage; u != (agent.Usage{}) {
		r.countAccount(acct, false, u.CostUSD)
		fmt.Fprintf(sp, "drover: %s used %d input and %d output tokens (cache: %d read, %d written), $%.4f\n",
			c.Name(), u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens, u.CostUSD)
	}
	// A limit counts when it ended the run: a CLI that got through anyway
	// (a warning, a retry that worked) finished its job.
	for _, l := range res.Passed {
		fmt.Fprintf(sp, "drover: account %s is limited until %s; the job went on without it\n",
			r.sitOut(acct, l, c.Name()), l.ResetsAt.UTC().Format(time.RFC3339))
	}
	if l := res.Limit; l != nil && res.Reason == job.ReasonExited && res.ExitCode != 0 {
		name := r.sitOut(acct, *l, c.Name())
		fmt.Fprintf(sp, "drover: account %s is limited until %s; the job goes back to the queue\n",
			name, l.ResetsAt.UTC().Format(time.RFC3339))
		res.Reason = job.ReasonLimited
		res.Message = clip(fmt.Sprintf("account %s limited until %s: %s", name, l.ResetsAt.UTC().Format(time.RFC3339), l.Message), 1024)
	}
	return res, nil
}

// sitOut records that the account l is of (acct, the attempt's, unless l
// names another) is limited until l.ResetsAt, and returns its name.
func (r *Runner) sitOut(acct accounts.Account, l agent.Limit, agentName string) string {
	if l.Account != "" && l.Account != acct.ID {
		a, err := r.accts.Get(l.Account)
		if err != nil {
			r.log.Error("record account limit", "account", l.Account, "err", err)
			return l.Account
		}
		acct = a
	}
	if err := r.accts.SetLimited(acct.ID, l.ResetsAt, l.Message); err != nil {
		r.log.Error("record account limit", "account", acct.ID, "err", err)
	}
	r.markDirty()
	r.log.Info("account limited", "account", acct.ID, "agent", agentName, "until", l.ResetsAt)
	return acctName(acct)
}

// agentAccount is what an agent is given of acct, its key read.
func (r *Runner) agentAccount(acct accounts.Account) (*agent.Account, error) {
	key := ""
	if acct.Kind == accounts.KindAPIKey {
		var err error
		if key, err = r.accts.Key(acct.ID); err != nil {
			return nil, fmt.Errorf("read the key of account %s: %w", acct.ID, err)
		}
	}
	a := &agent.Account{ID: acct.ID, Dir: r.accts.Dir(acct.ID), Key: key, BaseURL: acct.BaseURL,
		Provider: acct.Provider, Model: acct.Model}
	if c := acct.Capabilities; c != nil {
		a.NoToolCalls, a.NoStreamedToolCalls, a.ContextLength = !c.ToolCalls, !c.StreamedToolCalls, c.ContextLength
	}
	return a, nil
}

// refusesAccount says whether an attempt that ended for reason leaves its
// account needing attention: its provider refused the key or login, or a
// native account's server its model or endpoint.
func refusesAccount(reason job.Reason) bool {
	return reason == job.ReasonAuthFailed || reason == job.ReasonModelNotFound || reason == job.ReasonEndpointRefused
}

// learned records on acct how its model server takes tool calls, as an
// attempt found out: later attempts start that way.
func (r *Runner) learned(acct accounts.Account, f agent.Found) {
	c := accounts.Capabilities{ToolCalls: true, StreamedToolCalls: true}
	if acct.Capabilities != nil {
		c = *acct.Capabilities
	}
	c.Probed = r.now()
	c.ToolCalls = c.ToolCalls && !f.NoToolCalls
	c.StreamedToolCalls = c.StreamedToolCalls && c.ToolCalls && !f.NoStreamedToolCalls
	if err := r.accts.SetCapabilities(acct.ID, c); err != nil {
		r.log.Error("record what an attempt found of the account's model", "account", acct.ID, "err", err)
	}
}

// attentionFix is how an account's owner makes a refused account usable
// again.
func attentionFix(a accounts.Account) string {
	if a.Refused == string(job.ReasonModelNotFound) || a.Refused == string(job.ReasonEndpointRefused) {
		return "fix its model server, or add the account again with the right --base-url or --model; " +
			"'drover runner doctor' makes it ready once its probe passes"
	}
	if a.Kind == accounts.KindAPIKey {
		return "give it a valid key with 'drover runner account reset " + a.ID + " --api-key-stdin'"
	}
	return "log in again ('drover runner account login " + a.ID + "' prints how), then 'drover runner account reset " + a.ID + "'"
}

func acctName(a accounts.Account) string {
	if a.Label != "" {
		return a.Label + " (" + a.ID + ")"
	}
	return a.ID
}

// pickAccount chooses the attempt's account and the session to resume. A
// session the hub keeps (a portable agent's) is resumed on whichever
// account the attempt gets. Any other session is resumed only in its own
// account, in the kept worktree, and only when that account is not
// limited; otherwise a fresh session starts (its prompt carries the
// questions and answers so far) on any ready account. Such a running
// session never moves to another account.
func (r *Runner) pickAccount(a *attempt, c facts.Agent) (accounts.Account, string, error) {
	now := r.now()
	rs := a.spec.Resume
	if rs != nil && c.Caps.Portable && protocol.CheckSessionID(rs.Session) == nil {
		acct, err := r.pickNew(a, c, now)
		return acct, rs.Session, err
	}
	if rs != nil && rs.Session != "" && c.Caps.CanResume && a.ws != nil && a.ws.wt.Resumed() {
		if id, session, ok := strings.Cut(rs.Session, "/"); ok {
			acct, err := r.accts.Get(id)
			if err == nil && acct.Agent == c.Name && r.usable(acct, now) {
				return acct, session, nil
			}
		}
	}
	acct, err := r.pickNew(a, c, now)
	return acct, "", err
}

// pickNew chooses the account of an attempt that continues no session of
// an account's own: the job's, the hub's choice, or any ready one.
func (r *Runner) pickNew(a *attempt, c facts.Agent, now time.Time) (accounts.Account, error) {
	if pin := a.spec.Account; pin != "" {
		// The job names its account: that one or none.
		list, err := r.accts.List()
		if err != nil {
			return accounts.Account{}, err
		}
		for _, acct := range list {
			if acct.Agent == c.Name && (acct.ID == pin || acct.Label == pin) {
				if err := r.notUsable(acct, now, "the job's account"); err != nil {
					return acct, err
				}
				return acct, nil
			}
		}
		return accounts.Account{}, fmt.Errorf("this runner has no %s account %q", c.Name, pin)
	}
	if a.account != "" {
		// The hub's choice: the one account its requester may use here by
		// the owner's order. Another would spend for someone it may not.
		acct, err := r.accts.Get(a.account)
		switch {
		case err != nil || acct.Agent != c.Name:
			return accounts.Account{}, fmt.Errorf("this runner has no %s account %s, which the hub chose", c.Name, a.account)
		}
		if err := r.notUsable(acct, now, "the account the hub chose,"); err != nil {
			return acct, err
		}
		return acct, nil
	}
	// A hub that names no account: any ready one of the runner's.
	acct, err := r.accts.Pick(c.Name, now, func(a accounts.Account) bool { return r.usable(a, now) })
	return acct, err
}

// notUsable says why acct (what names it) cannot run a job at now; nil
// when it is ready.
func (r *Runner) notUsable(acct accounts.Account, now time.Time, what string) error {
	st, why, fix := AccountState(r.agents.LoggedIn, acct, r.accts.Dir(acct.ID), now)
	switch st {
	case protocol.AccountReady:
		return nil
	case protocol.AccountLimited:
		return fmt.Errorf("%s %s is limited until %s", what, acctName(acct), acct.LimitedUntil.UTC().Format(time.RFC3339))
	}
	return fmt.Errorf("%s %s %s (%s): %s", what, acctName(acct), st, why, fix)
}

// cliPrompt is what the CLI is told: on a resumed session only the answers
// it waited for; otherwise the whole prompt, with the questions and answers
// so far when the job asked before.
func (r *Runner) cliPrompt(a *attempt, c facts.Agent, resumed bool) (string, error) {
	rs := a.spec.Resume
	if resumed && rs != nil {
		var answers strings.Builder
		for _, q := range rs.History {
			if q.Attempt != rs.Attempt || q.Answer == nil {
				continue
			}
			fmt.Fprintf(&answers, "\nQuestion: %s\nAnswer: %s\n", q.Question, q.Answer.Text)
		}
		if answers.Len() == 0 {
			return "You were interrupted (the runner stopped or your account hit a limit) and now continue: " +
				"pick the job up where you left off; check what your last command did before you repeat it. " +
				"Remember: deliver when done, ask if you need a decision.\n", nil
		}
		return "Your question was answered; continue the job. Remember: deliver when done, ask if you need a decision.\n" +
			answers.String(), nil
	}
	in := agent.PromptInput{Prompt: strings.Join(a.spec.Args, " "), RootFiles: c.Root}
	if a.ws != nil {
		in.Worktree, in.Sparse = a.ws.wt.Dir(), a.ws.wt.Sparse()
	}
	if rs != nil {
		in.Questions = questionRecords(rs.History)
	}
	p, err := agent.BuildPrompt(a.ctx, in)
	if err != nil {
		return "", fmt.Errorf("%s: %w", c.Name, err)
	}
	return p, nil
}

// newUUID is a random (version 4) UUID: Claude Code and Gemini CLI take one
// as a new session's id.
func newUUID() string {
	var b [16]byte
	_, _ = io.ReadFull(rand.Reader, b[:]) // crypto/rand never fails on Linux
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
