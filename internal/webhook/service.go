package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"drover/internal/ids"
	"drover/internal/store"
	"drover/internal/tick"
)

// Hooks sends the hub's outbound webhooks and answers the API's calls
// on them.
type Hooks struct {
	core Core
	cfg  Config
	log  *slog.Logger
	http *http.Client
	wake chan struct{} // buffered 1
	// send asks the loop's next pass to read the due deliveries: a try
	// ended (the next of its job may be due). A job's change alone does
	// not: expand says whether it made any (a burst of jobs without hooks
	// read the due deliveries twice per job for none).
	send atomic.Bool
	wg   sync.WaitGroup

	mu       sync.Mutex
	inFlight map[string]bool // delivery ids being sent by this process
}

// New is a Hooks over core, whose background work (the leader's) lives
// as long as ctx.
func New(ctx context.Context, core Core, cfg Config) *Hooks {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Sweep == 0 {
		cfg.Sweep = DefaultSweep
	}
	if cfg.Recheck == 0 {
		cfg.Recheck = DefaultRecheck
	}
	if cfg.Retry.First == 0 {
		cfg.Retry = DefaultRetry
	}
	s := &Hooks{core: core, cfg: cfg, log: cfg.Logger, http: cfg.HTTP, wake: make(chan struct{}, 1),
		inFlight: map[string]bool{}}
	if s.http == nil {
		s.http = &http.Client{Timeout: cfg.Timeout, CheckRedirect: sameHost, Transport: transport(cfg.AllowPrivate)}
	}
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.loop(ctx) }()
	return s
}

// transport dials only public addresses unless allowPrivate. The check is
// on the address dialled, after name resolution, so neither a name that
// resolves to one nor a redirect reaches the hub's own network.
func transport(allowPrivate bool) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		d.Control = func(_, address string, _ syscall.RawConn) error { return checkDestination(address) }
	}
	t.DialContext = d.DialContext
	return t
}

// ErrPrivateDestination is a hook's address the hub does not send to.
var ErrPrivateDestination = errors.New("the hook's address is loopback, private or link-local; the hub's operator allows those with drover hub --webhook-private")

func checkDestination(address string) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("webhook destination: %w", err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("webhook destination: %w", err)
	}
	ip = ip.Unmap()
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsUnspecified() ||
		ip.IsMulticast() || ip.IsInterfaceLocalMulticast() {
		return ErrPrivateDestination
	}
	return nil
}

// sameHost follows a few redirects, to the same host only: a receiver
// cannot send the signed body elsewhere.
func sameHost(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects || req.URL.Host != via[0].URL.Host || req.URL.Scheme != via[0].URL.Scheme {
		return http.ErrUseLastResponse
	}
	return nil
}

// Wait waits for the background work once the hub's context ended.
func (s *Hooks) Wait() { s.wg.Wait() }

// JobChanged wakes the sender: the hub calls it whenever a job changes
// (the change itself is in the outbox already).
func (s *Hooks) JobChanged(string) { s.kick() }

func (s *Hooks) kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// loop expands the outbox and sends what is due while this hub leads. It
// reads the store only when there may be something to do: told of a
// job's change or a try's end, when the soonest pending delivery it read
// falls due, when it becomes the leader, and every Recheck (a change
// committed by another hub whose hint was lost). A tick every Sweep only
// looks at the clock and the leadership, so an idle leader with no hooks
// makes one read a Recheck (not two a second), and its ticks
// fall on the whole seconds the runners' heartbeats wake the hub on.
func (s *Hooks) loop(ctx context.Context) {
	t := time.NewTimer(tick.Next(time.Now(), s.cfg.Sweep)) // the hub's clock may be a fake one
	defer t.Stop()
	var pruned, checked time.Time
	var due time.Time // when the soonest pending delivery read falls due; zero: none
	leading, woken := false, false
	for {
		if !s.core.Leading() {
			leading = false
		} else {
			now := s.cfg.Now()
			full := !leading || now.Sub(checked) >= s.cfg.Recheck
			leading = true
			if now.Sub(pruned) >= pruneEvery {
				pruned = now
				s.prune(ctx, now)
			}
			var made bool
			if woken || full {
				var err error
				if made, err = s.expand(ctx); err != nil && ctx.Err() == nil {
					s.log.Warn("could not expand jobs' changes into webhook deliveries; the next pass tries again", "err", err)
					full = false
					checked = time.Time{} // the next tick reads again
				}
			}
			if made || s.send.Swap(false) || full || (!due.IsZero() && !now.Before(due)) {
				next, err := s.sendDue(ctx, now)
				if err != nil && ctx.Err() == nil {
					s.log.Warn("could not list the due webhook deliveries", "err", err)
					next = now // the next tick reads again
				}
				due = next
			}
			if full {
				checked = now
			}
		}
		woken = false
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
			woken = true
		case <-t.C:
			t.Reset(tick.Next(time.Now(), s.cfg.Sweep))
		}
	}
}

// prune removes the deliveries that ended more than KeepLog ago, a batch
// at a time.
func (s *Hooks) prune(ctx context.Context, now time.Time) {
	for ctx.Err() == nil {
		var n int64
		err := s.cfg.Store.Write(ctx, func(tx store.Tx) error {
			var err error
			n, err = tx.PruneWebhookDeliveries(now.Add(-KeepLog), pruneBatch)
			return err
		})
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("could not prune the webhooks' delivery logs", "err", err)
			}
			return
		}
		if n < pruneBatch {
			return
		}
	}
}

// expand turns the recorded changes into deliveries, each change with its
// deliveries in one transaction that also forgets it.
func (s *Hooks) expand(ctx context.Context) (made bool, err error) {
	for {
		var changes []store.JobChange
		var hooks []store.Webhook
		// Without one snapshot: an empty outbox, every pass of a hub with
		// no hooks, is one round trip on Postgres. A hook added after the
		// changes were read only hears them sooner than it would at the
		// next pass; one removed gets no delivery (AddWebhookDelivery).
		err := store.ReadEach(ctx, s.cfg.Store, func(tx store.Tx) error {
			var err error
			if changes, err = tx.JobChanges(expandBatch); err != nil || len(changes) == 0 {
				return err
			}
			hooks, err = tx.Webhooks("")
			return err
		})
		if err != nil || len(changes) == 0 {
			return made, err
		}
		for _, c := range changes {
			ds, err := s.deliveriesOf(ctx, c, hooks)
			if err != nil {
				return made, fmt.Errorf("expand the change of job %s: %w", c.JobID, err)
			}
			err = s.cfg.Store.Write(ctx, func(tx store.Tx) error {
				for _, d := range ds {
					if err := tx.AddWebhookDelivery(d); err != nil {
						return err
					}
				}
				return tx.DoneJobChange(c.Seq)
			})
			if err != nil {
				return made, fmt.Errorf("record the deliveries of job %s: %w", c.JobID, err)
			}
			made = made || len(ds) > 0
		}
		if len(changes) < expandBatch {
			return made, nil
		}
	}
}

// deliveriesOf is change c's delivery to each hook that asked for its
// event and whose owner may see the job.
func (s *Hooks) deliveriesOf(ctx context.Context, c store.JobChange, hooks []store.Webhook) ([]store.WebhookDelivery, error) {
	event := eventOf(c.State)
	if event == "" {
		return nil, nil
	}
	var j store.Job
	var requester string
	var question string
	err := store.ReadEach(ctx, s.cfg.Store, func(tx store.Tx) error {
		var err error
		if j, err = tx.Job(c.JobID); err != nil {
			return err
		}
		if u, err := tx.User(j.RequesterID); err == nil {
			requester = u.Name
		}
		if event == EventAsked {
			qs, err := tx.Questions(j.ID)
			if err != nil {
				return err
			}
			if len(qs) > 0 {
				question = qs[len(qs)-1].Text
			}
		}
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil // a job that is gone has no events
	} else if err != nil {
		return nil, err
	}
	now := s.cfg.Now()
	var out []store.WebhookDelivery
	for _, h := range hooks {
		if !known(h.Events, event) {
			continue
		}
		if ok, err := s.hears(ctx, h, j); err != nil {
			return nil, err
		} else if !ok {
			continue
		}
		p := Payload{Event: event, Delivery: ids.New("wd"), At: c.At, Job: PayloadJob{
			ID: j.ID, State: string(c.State), Agent: j.Agent, Project: j.Project, Requester: requester,
			URL: s.core.JobURL(j.ID), CreatedAt: j.CreatedAt}}
		switch event {
		case EventFinished:
			p.Job.Reason, p.Job.ExitCode, p.Job.Finished = string(j.Reason), j.ExitCode, j.FinishedAt
		case EventAsked:
			p.Job.Question = truncate(question, maxQuestion)
		}
		body, err := json.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("encode the payload: %w", err)
		}
		out = append(out, store.WebhookDelivery{ID: p.Delivery, HookID: h.ID, JobID: j.ID, ChangeSeq: c.Seq,
			Event: event, Payload: string(body), State: store.WebhookPending, NextAt: now, CreatedAt: now, UpdatedAt: now})
	}
	return out, nil
}

// hears says whether hook h gets job j's events: its owner's own jobs,
// or the jobs on its project its owner may see (now: a removed member
// stops hearing).
func (s *Hooks) hears(ctx context.Context, h store.Webhook, j store.Job) (bool, error) {
	if h.Project == "" {
		return j.RequesterID == h.OwnerID, nil
	}
	if j.Project != h.Project {
		return false, nil
	}
	return s.core.SeesJob(ctx, h.OwnerID, j)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// sendDue starts sending the deliveries due at now, a bounded number at a
// time; each one done wakes the loop (the next of its job may be due). It
// says when the soonest pending delivery not yet due falls due (zero:
// none), read in the same statement: the deliveries are listed soonest
// first, the due ones and then those to come.
func (s *Hooks) sendDue(ctx context.Context, now time.Time) (next time.Time, err error) {
	var ds []store.WebhookDelivery
	err = store.ReadEach(ctx, s.cfg.Store, func(tx store.Tx) error {
		var err error
		ds, err = tx.DueWebhookDeliveries(now.Add(farAhead), sendBatch)
		return err
	})
	if err != nil {
		return time.Time{}, err
	}
	if i := slices.IndexFunc(ds, func(d store.WebhookDelivery) bool { return d.NextAt.After(now) }); i >= 0 {
		ds, next = ds[:i], ds[i].NextAt
	} else if len(ds) == sendBatch {
		next = now // more may be due than one batch
	}
	for _, d := range ds {
		s.mu.Lock()
		if s.inFlight[d.ID] || len(s.inFlight) >= maxInFlight || ctx.Err() != nil {
			s.mu.Unlock()
			continue
		}
		s.inFlight[d.ID] = true
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			if err := s.deliver(ctx, d); err != nil && ctx.Err() == nil {
				s.log.Warn("could not record a webhook delivery; it is sent again", "delivery", d.ID, "err", err)
			}
			s.mu.Lock()
			delete(s.inFlight, d.ID)
			s.mu.Unlock()
			s.send.Store(true)
			s.kick()
		}()
	}
	return next, nil
}

// deliver makes one try of d and records what came of it. The try first
// claims d in the store (moves its next try past this one's timeout): a
// read of the due deliveries begun before an earlier try's record, or
// another hub's sender while leadership changes hands, then finds it
// claimed and sends nothing, so a job's deliveries never go out of order.
// A hub that dies mid-try leaves the claim to lapse; the next leader
// sends d again, with the same id.
func (s *Hooks) deliver(ctx context.Context, d store.WebhookDelivery) error {
	var h store.Webhook
	var j store.Job
	now := s.cfg.Now()
	err := s.cfg.Store.Write(ctx, func(tx store.Tx) error {
		if err := tx.ClaimWebhookDelivery(d.ID, now, now.Add(s.cfg.Timeout+claimMargin)); err != nil {
			return err
		}
		var err error
		if h, err = tx.Webhook(d.HookID); err != nil {
			return err
		}
		j, err = tx.Job(d.JobID)
		return err
	})
	if errors.Is(err, store.ErrNotFound) && h.ID == "" {
		return nil // claimed or done meanwhile, or its hook was removed with it
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		return s.record(ctx, d, store.WebhookFailed, 0, "the job is gone", now)
	case err != nil:
		return err
	}
	if ok, err := s.core.SeesJob(ctx, h.OwnerID, j); err != nil {
		return err
	} else if !ok {
		return s.record(ctx, d, store.WebhookFailed, 0, "the hook's owner may no longer see the job", now)
	}
	body, err := render(h.Format, d.Payload)
	if err != nil {
		return s.record(ctx, d, store.WebhookFailed, 0, err.Error(), now)
	}
	status, sendErr := s.post(ctx, h, d, body)
	if ctx.Err() != nil {
		return nil // stopping: the next leader sends it again
	}
	now = s.cfg.Now()
	if sendErr == nil {
		return s.record(ctx, d, store.WebhookDelivered, status, "", now)
	}
	if errors.Is(sendErr, ErrPrivateDestination) {
		return s.record(ctx, d, store.WebhookFailed, 0, "refused: "+ErrPrivateDestination.Error(), now)
	}
	p, tries := s.cfg.Retry, d.Attempts+1
	if (p.Tries > 0 && tries >= p.Tries) || (p.MaxElapsed > 0 && now.Sub(d.CreatedAt) >= p.MaxElapsed) {
		return s.record(ctx, d, store.WebhookFailed, status, "gave up: "+sendErr.Error(), now)
	}
	d.NextAt = now.Add(p.Delay(d.Attempts))
	return s.record(ctx, d, store.WebhookPending, status, sendErr.Error(), now)
}

// record writes the outcome of a try of d (counted in Attempts).
func (s *Hooks) record(ctx context.Context, d store.WebhookDelivery, state store.WebhookDeliveryState, status int, msg string, now time.Time) error {
	d.State, d.Status, d.Error, d.UpdatedAt = state, status, msg, now
	d.Attempts++
	if state != store.WebhookPending {
		d.NextAt = now
	}
	if state == store.WebhookFailed {
		s.log.Warn("gave up a webhook delivery", "hook", d.HookID, "delivery", d.ID, "event", d.Event, "job", d.JobID,
			"attempts", d.Attempts, "err", msg)
	}
	err := s.cfg.Store.Write(ctx, func(tx store.Tx) error { return tx.UpdateWebhookDelivery(d) })
	if errors.Is(err, store.ErrNotFound) {
		return nil // its hook was removed meanwhile
	}
	return err
}

// post sends body once: an error for anything but a 2xx answer, whose
// body is read (bounded) and dropped.
func (s *Hooks) post(ctx context.Context, h store.Webhook, d store.WebhookDelivery, body []byte) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("make the request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "drover-webhook")
	req.Header.Set(HeaderEvent, d.Event)
	req.Header.Set(HeaderDelivery, d.ID)
	req.Header.Set(HeaderSignature, Sign(h.Secret, s.cfg.Now(), body))
	resp, err := s.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("send: %w", redact(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponse))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("the receiver answered %s", resp.Status)
	}
	return resp.StatusCode, nil
}

// redact is a send's error without the URL (a chat service's hook URL is
// a credential): what failed, for the delivery log and the hub's log.
func redact(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
