package webhook

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Without the operator's leave, a hook cannot make the hub post to its
// own host or network: refused when the URL names such an address, and at
// the dial when a name resolves to one.
func TestPrivateDestinations(t *testing.T) {
	for _, u := range []string{"http://127.0.0.1:9/h", "http://localhost/h", "http://[::1]/h", "http://10.1.2.3/h",
		"http://192.168.0.1/h", "http://169.254.169.254/latest", "http://[fe80::1]/h", "http://0.0.0.0/h", "http://[::ffff:127.0.0.1]/h"} {
		if err := checkURL(u, false); err == nil {
			t.Errorf("%s: accepted", u)
		}
		if err := checkURL(u, true); err != nil {
			t.Errorf("%s with private addresses allowed: %v", u, err)
		}
	}
	for _, u := range []string{"https://hooks.example.com/x", "http://203.0.113.7/h", "http://[2001:db8::1]/h"} {
		if err := checkURL(u, false); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer srv.Close()
	for _, allow := range []bool{false, true} {
		c := &http.Client{Transport: transport(allow)}
		resp, err := c.Post(srv.URL, "application/json", nil) // a name or address that reaches loopback
		if err == nil {
			resp.Body.Close()
		}
		if got := errors.Is(err, ErrPrivateDestination); got == allow {
			t.Errorf("allowPrivate %v: sent to %s: err %v", allow, srv.URL, err)
		}
	}
}
