package bench

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"drover/internal/apitypes"
)

// pollers stand in for the design the gateway replaced: every runner asking
// the hub for work on a timer. Each does an authenticated GET
// /api/v1/runner/login with its own runner token every interval, over its
// own keep-alive connection (like separate machines). That costs the hub
// the same token lookup a "any work for me?" poll would, and less than a
// real poll, which would also query the queue.
type pollers struct {
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	transports []*http.Transport
	ok         atomic.Int64
	failed     atomic.Int64
}

func startPollers(ctx context.Context, hubURL string, tokens []string, every time.Duration) *pollers {
	pctx, cancel := context.WithCancel(ctx)
	p := &pollers{cancel: cancel}
	url := hubURL + apitypes.APIPrefix + "/runner/login"
	for _, tok := range tokens {
		tr := &http.Transport{MaxIdleConnsPerHost: 1, IdleConnTimeout: 10 * time.Minute}
		p.transports = append(p.transports, tr)
		hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.poll(pctx, hc, url, tok, every)
		}()
	}
	return p
}

// poll asks once per interval, starting at a random point of the first
// interval so that the fleet's requests spread evenly over the second.
func (p *pollers) poll(ctx context.Context, hc *http.Client, url, token string, every time.Duration) {
	t := time.NewTimer(rand.N(every))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		t.Reset(every)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			p.failed.Add(1)
			continue
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				p.failed.Add(1)
			}
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			p.ok.Add(1)
		} else {
			p.failed.Add(1)
		}
	}
}

func (p *pollers) stop() {
	p.cancel()
	p.wg.Wait()
	for _, tr := range p.transports {
		tr.CloseIdleConnections()
	}
}
