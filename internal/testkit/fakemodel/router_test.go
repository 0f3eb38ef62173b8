package fakemodel_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"drover/internal/testkit/fakemodel"
)

// Two conversations at once through one router each play their own
// script; a request that names neither, or both, is taken by none.
func TestRouterKeepsConversationsApart(t *testing.T) {
	alpha := fakemodel.NewFakeChat(t, []fakemodel.Turn{fakemodel.Text("alpha one"), fakemodel.Text("alpha two")})
	beta := fakemodel.NewFakeChat(t, []fakemodel.Turn{fakemodel.Text("beta one")})
	rt := fakemodel.NewRouter(t, fakemodel.Route{Key: "task alpha", Server: alpha}, fakemodel.Route{Key: "task beta", Server: beta})
	post := func(prompt string) (int, string) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"model": "m", "messages": []any{map[string]any{"role": "user", "content": prompt}},
			"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "write"}}}})
		resp, err := http.Post(rt.URL+"/v1/chat/completions", "application/json", strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct{ prompt, want string }{
		{"do task alpha", "alpha one"}, {"do task beta", "beta one"}, {"do task alpha again", "alpha two"},
	} {
		if code, got := post(c.prompt); code != http.StatusOK || !strings.Contains(got, c.want) {
			t.Errorf("%q: %d %s; want %q", c.prompt, code, got, c.want)
		}
	}
	for _, prompt := range []string{"do task gamma", "do task alpha and task beta"} {
		if code, got := post(prompt); code != http.StatusBadRequest {
			t.Errorf("%q: %d %s; want 400", prompt, code, got)
		}
	}
	if !alpha.Done() || !beta.Done() || len(alpha.Requests()) != 2 || len(beta.Requests()) != 1 {
		t.Errorf("alpha done %v with %d requests, beta done %v with %d", alpha.Done(), len(alpha.Requests()), beta.Done(), len(beta.Requests()))
	}
}
