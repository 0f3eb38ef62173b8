package netpolicy

import (
	"slices"
	"strings"
	"testing"
)

func TestParsePattern(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{"proxy.golang.org", "proxy.golang.org:443", ""},
		{"Registry.NPMJS.org.", "registry.npmjs.org:443", ""},
		{"127.0.0.1:8080", "127.0.0.1:8080", ""},
		{"[::1]:80", "[::1]:80", ""},
		{"::1", "[::1]:443", ""},
		{"*.pythonhosted.org", "*.pythonhosted.org:443", ""},
		{"*.example.com:8443", "*.example.com:8443", ""},
		{"", "", "empty"},
		{"*", "", "every host"},
		{"*:443", "", "every host"},
		{"*.com", "", "top-level domain"},
		{"a.*.com", "", "not a host name label"},
		{"exa mple.com", "", "not a host name label"},
		{"example.com:0", "", "port"},
		{"example.com:99999", "", "port"},
		{"example.com:http", "", "port"},
		{"0.0.0.0:80", "", "unspecified"},
		{"-bad.com", "", "label"},
		{"http://example.com", "", "host pattern"},
	} {
		p, err := ParsePattern(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParsePattern(%q) = %v, %v; want an error with %q", tc.in, p, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("ParsePattern(%q): %v", tc.in, err)
		case tc.err == "" && p.String() != tc.want:
			t.Errorf("ParsePattern(%q) = %s, want %s", tc.in, p, tc.want)
		}
	}
}

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, target string
		want            bool
	}{
		{"proxy.golang.org", "proxy.golang.org:443", true},
		{"proxy.golang.org", "PROXY.golang.org.:443", true},
		{"proxy.golang.org", "proxy.golang.org:80", false},
		{"proxy.golang.org", "evilproxy.golang.org:443", false},
		{"*.golang.org", "proxy.golang.org:443", true},
		{"*.golang.org", "golang.org:443", false},
		{"*.golang.org", "golang.org.evil.com:443", false},
		{"*.golang.org", "xgolang.org:443", false},
		{"127.0.0.1:8080", "127.0.0.1:8080", true},
		{"::1", "[0:0::1]:443", true},
		{"127.0.0.1:8080", "127.0.0.1", false},
	} {
		p, err := ParsePattern(tc.pattern)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Match(tc.target); got != tc.want {
			t.Errorf("%s matches %s = %v, want %v", tc.pattern, tc.target, got, tc.want)
		}
	}
	if !(Matcher{Open: true}).Allows("anything.example:1") || (Matcher{Open: true}).Allows("no port") {
		t.Error("an open matcher allows every host:port and nothing malformed")
	}
}

func catalog() Catalog {
	return Catalog{Policies: map[string][]string{
		"go":      {"proxy.golang.org", "sum.golang.org"},
		"npm":     {"registry.npmjs.org"},
		"private": {"127.0.0.1:9999"},
		"wide":    {"*.golang.org", "registry.npmjs.org", "pypi.org"},
	}}
}

func TestCatalogCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Catalog
		err  string
	}{
		{"ok", catalog(), ""},
		{"everything", Catalog{Policies: map[string][]string{"all": {"*"}}}, "every host"},
		{"malformed", Catalog{Policies: map[string][]string{"x": {"a b"}}}, "label"},
		{"empty", Catalog{Policies: map[string][]string{"x": {}}}, "no hosts"},
		{"reserved", Catalog{Policies: map[string][]string{"open": {"a.com"}}}, "reserved"},
		{"name", Catalog{Policies: map[string][]string{"Bad Name": {"a.com"}}}, "a name is"},
	} {
		err := tc.c.Check()
		if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: Check() = %v, want %q", tc.name, err, tc.err)
		}
	}
}

func TestChoose(t *testing.T) {
	open := catalog()
	open.AllowOpen = true
	for _, tc := range []struct {
		name  string
		c     Catalog
		names []string
		want  []string
		err   string
	}{
		{"some", catalog(), []string{"npm", "go", "npm"}, []string{"go", "npm"}, ""},
		{"none", catalog(), []string{"none"}, []string{}, ""},
		{"empty", catalog(), nil, []string{}, ""},
		{"unknown", catalog(), []string{"pip"}, nil, `no network policy "pip"`},
		{"open off", catalog(), []string{"open"}, nil, "not enabled"},
		{"open on", open, []string{"open"}, []string{"open"}, ""},
		{"open and more", open, []string{"open", "go"}, nil, "alone"},
		{"none and more", catalog(), []string{"go", "none"}, nil, "alone"},
	} {
		got, err := tc.c.Choose(tc.names)
		if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) || !slices.Equal(got, tc.want) {
			t.Errorf("%s: Choose(%q) = %q, %v; want %q, %q", tc.name, tc.names, got, err, tc.want, tc.err)
		}
	}
}

func TestNarrow(t *testing.T) {
	for _, tc := range []struct {
		name               string
		allowed, requested []string
		want               []string
		err                string
	}{
		{"default", []string{"go", "npm"}, nil, []string{"go", "npm"}, ""},
		{"none", []string{"go", "npm"}, []string{"none"}, []string{}, ""},
		{"subset", []string{"go", "npm"}, []string{"npm"}, []string{"npm"}, ""},
		{"widen", []string{"go"}, []string{"npm"}, nil, "never widens"},
		{"widen partly", []string{"go"}, []string{"go", "npm"}, nil, "never widens"},
		{"open asked", []string{"go"}, []string{"open"}, nil, "never widens"},
		{"open allows named", []string{"open"}, []string{"go"}, []string{"go"}, ""},
		{"open kept", []string{"open"}, []string{"open"}, []string{"open"}, ""},
		{"no network widened", []string{}, []string{"go"}, nil, "allows: none"},
		{"none and more", []string{"go"}, []string{"none", "go"}, nil, "alone"},
	} {
		got, err := Narrow(tc.allowed, tc.requested)
		if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) || !slices.Equal(got, tc.want) {
			t.Errorf("%s: Narrow(%q, %q) = %q, %v; want %q, %q", tc.name, tc.allowed, tc.requested, got, err, tc.want, tc.err)
		}
	}
}

func TestResolveAndWiden(t *testing.T) {
	c := catalog()
	m, err := c.Resolve([]string{"go"})
	if err != nil || !m.Allows("sum.golang.org:443") || m.Allows("registry.npmjs.org:443") {
		t.Fatalf("Resolve(go) = %+v, %v", m, err)
	}
	if m, _ := c.Resolve([]string{"open"}); m.Open {
		t.Error("open resolves to nothing while the operator has it off")
	}
	for _, tc := range []struct {
		inForce []string
		host    string
		want    string
	}{
		{[]string{"go"}, "registry.npmjs.org:443", "drover projects network web --agent go,npm"},
		{[]string{}, "proxy.golang.org:443", "drover projects network web --agent go"},
		{[]string{"go"}, "example.org:443", "no network policy on this hub allows example.org:443"},
	} {
		if got := c.WidenCommand("web", PhaseAgent, tc.inForce, tc.host); !strings.Contains(got, tc.want) {
			t.Errorf("WidenCommand(%q, %s) = %q, want %q", tc.inForce, tc.host, got, tc.want)
		}
	}
}
