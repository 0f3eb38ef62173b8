package runner

import (
	"math/rand/v2"
	"sync"
)

// hubList is the hubs a runner may talk to (one deployment on one
// database, so any of them serves every request) and the one it talks to
// now: the gateway, publications and context downloads all go to current,
// so an attempt never splits its requests over two hubs by accident.
type hubList struct {
	mu   sync.Mutex
	urls []string // normalized, at least one
	cur  int
}

// newHubList starts at a random hub so that runners given the same list
// spread over the hubs.
func newHubList(urls []string) *hubList {
	return &hubList{urls: urls, cur: rand.N(len(urls))}
}

// current is the hub in use: the one that answered last, or the one to try
// next.
func (h *hubList) current() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.urls[h.cur]
}

// failed moves on from url after it failed, unless another caller already
// did; it answers the hub to use now.
func (h *hubList) failed(url string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.urls[h.cur] == url {
		h.cur = (h.cur + 1) % len(h.urls)
	}
	return h.urls[h.cur]
}

func (h *hubList) len() int { return len(h.urls) }
