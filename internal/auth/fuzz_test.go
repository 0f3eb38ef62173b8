package auth

import (
	"strings"
	"testing"
)

// FuzzBearerToken: the token is taken only from a "Bearer " header, is
// 1-256 bytes with no surrounding space, and ValidHash accepts exactly the
// shape Hash produces.
func FuzzBearerToken(f *testing.F) {
	for _, s := range []string{"Bearer drv_u_abc", "Bearer ", "bearer x", "Basic eDp5", "Bearer  x  ", "Bearer " + strings.Repeat("t", 300), Hash("x"), strings.ToUpper(Hash("x"))} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		if len(h) > 4096 {
			return
		}
		if tok, err := BearerToken(h); err == nil {
			if !strings.HasPrefix(h, "Bearer ") || tok == "" || len(tok) > 256 || strings.TrimSpace(tok) != tok || !strings.Contains(h, tok) {
				t.Fatalf("token %q taken from %q", tok, h)
			}
		}
		if ValidHash(h) {
			if len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
				t.Fatalf("ValidHash(%q)", h)
			}
		}
		if !ValidHash(Hash(h)) {
			t.Fatalf("Hash(%q) is not ValidHash", h)
		}
	})
}
