package rules

import (
	"strings"
	"testing"
)

func TestCheckContextName(t *testing.T) {
	for name, ok := range map[string]bool{
		"spec.md": true, "docs/notes.txt": true, "a/b/c.json": true, "env.md": true, "keys.txt": true,
		"": false, "/etc/passwd": false, "../x": false, "a/../../x": false, "./a": false, "a//b": false,
		"a\\b": false, "a\nb": false, ".": false, "..": false, ".git/config": false,
		".env": false, ".env.local": false, "prod.env": false, "id_rsa": false, "id_rsa.pub": false,
		"id_ed25519": false, "cert.pem": false, "server.key": false, "x/y.P12": false,
	} {
		if err := CheckContextName(name); (err == nil) != ok {
			t.Errorf("CheckContextName(%q) = %v", name, err)
		}
	}
}

func TestCheckContextFiles(t *testing.T) {
	up := func(name, data string) ContextUpload { return ContextUpload{Name: name, Data: []byte(data)} }
	ok := []ContextUpload{up("a.md", "x"), up("b/c.md", "y")}
	if err := CheckContextFiles(ok); err != nil {
		t.Fatal(err)
	}
	many := make([]ContextUpload, MaxContextFiles+1)
	for i := range many {
		many[i] = up("f"+strings.Repeat("x", i), "")
	}
	big := string(make([]byte, MaxContextFile))
	for _, tt := range []struct {
		files []ContextUpload
		want  string
	}{
		{[]ContextUpload{up("k.txt", "x\n-----BEGIN EC PRIVATE KEY-----\n")}, "private key"},
		{[]ContextUpload{up("a", "1"), up("a", "2")}, "twice"},
		{[]ContextUpload{up("a", "1"), up("a/b", "2")}, "folder"},
		{many, "limit"},
		{[]ContextUpload{up("big", big+"x")}, "limit"},
		{[]ContextUpload{up("b1", big), up("b2", big), up("b3", "x")}, "in all"},
	} {
		if err := CheckContextFiles(tt.files); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("got %v, want an error mentioning %q", err, tt.want)
		}
	}
}
