package fakemodel

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Route sends the model requests whose body holds Key to Server.
type Route struct {
	Key    string
	Server *FakeServer
}

// Router is FAKE code for tests: one model URL in front of fake servers
// of one protocol, each a conversation of its own. A script is played in
// order by one client at a time; agents that run at once (an evaluation's
// instances) each need their own, picked by something every request of
// their conversation carries, such as a phrase of the task's prompt.
type Router struct {
	// URL is the router's base URL, http://127.0.0.1:PORT, without a path.
	URL    string
	routes []Route
}

// NewRouter routes each request to the one route whose key its body
// holds (as the request's JSON spells it). A request with no body (HEAD,
// a list of models) goes to the first route; a request with a body that
// no key, or more than one, matches is answered 400 and taken by none.
func NewRouter(t testing.TB, routes ...Route) *Router {
	t.Helper()
	if len(routes) == 0 {
		t.Fatal("fakemodel: a router needs a route")
	}
	rt := &Router{routes: routes}
	srv := httptest.NewServer(http.HandlerFunc(rt.serve))
	rt.URL = srv.URL
	t.Cleanup(srv.Close)
	return rt
}

func (rt *Router) serve(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	body := raw
	if r.Header.Get("Content-Encoding") == "gzip" && len(raw) > 0 {
		z, err := gzip.NewReader(bytes.NewReader(raw))
		if err == nil {
			body, err = io.ReadAll(z)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	}
	var to *FakeServer
	if len(body) == 0 {
		to = rt.routes[0].Server
	}
	var keys []string
	for _, route := range rt.routes {
		if len(body) > 0 && bytes.Contains(body, []byte(route.Key)) {
			to = route.Server
			keys = append(keys, route.Key)
		}
	}
	if to == nil || len(keys) > 1 {
		http.Error(w, fmt.Sprintf("fakemodel: the request matches the routes %q, want one", keys), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(raw))
	to.serve(w, r)
}
