package cli

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSettingsPrecedence(t *testing.T) {
	const other = "http://hub.example:7700"
	tests := []struct {
		name       string
		flagHub    string
		tokenFile  bool // --token-file pointing at a file holding "file-token"
		env        map[string]string
		saved      *clientConfig
		adminToken bool // the default data dir holds admin.token
		wantHub    string
		wantToken  string
	}{
		{name: "nothing", wantHub: defaultHub},
		{name: "admin token on the default hub", adminToken: true, wantHub: defaultHub, wantToken: "admin-token"},
		{name: "admin token via localhost", flagHub: "localhost:7700", adminToken: true,
			wantHub: "http://localhost:7700", wantToken: "admin-token"},
		{name: "no admin token for another hub", flagHub: other, adminToken: true, wantHub: other},
		{name: "saved login", saved: &clientConfig{Hub: other + "/", Token: "saved"}, adminToken: true,
			wantHub: other, wantToken: "saved"},
		{name: "saved login beats admin token", saved: &clientConfig{Hub: defaultHub, Token: "saved"}, adminToken: true,
			wantHub: defaultHub, wantToken: "saved"},
		{name: "saved token only for its hub", env: map[string]string{"DROVER_HUB": "http://else:1"},
			saved: &clientConfig{Hub: other, Token: "saved"}, wantHub: "http://else:1"},
		{name: "env hub matching saved", env: map[string]string{"DROVER_HUB": other + "/"},
			saved: &clientConfig{Hub: other, Token: "saved"}, wantHub: other, wantToken: "saved"},
		{name: "env token beats saved", env: map[string]string{"DROVER_TOKEN": "env-token"},
			saved: &clientConfig{Hub: other, Token: "saved"}, wantHub: other, wantToken: "env-token"},
		{name: "flag hub beats env", flagHub: "http://flag:1", env: map[string]string{"DROVER_HUB": other},
			wantHub: "http://flag:1"},
		{name: "token file beats env", tokenFile: true, env: map[string]string{"DROVER_TOKEN": "env-token"},
			adminToken: true, wantHub: defaultHub, wantToken: "file-token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			env := map[string]string{"HOME": home}
			for k, v := range tt.env {
				env[k] = v
			}
			a := newApp(Env{Getenv: func(k string) string { return env[k] }})
			a.hubFlag = tt.flagHub
			if tt.tokenFile {
				a.tokenFile = filepath.Join(home, "tok")
				writeFile(t, a.tokenFile, "file-token\n")
			}
			if tt.saved != nil {
				p, _ := a.configPath()
				if err := saveConfig(p, *tt.saved); err != nil {
					t.Fatal(err)
				}
			}
			if tt.adminToken {
				d, _ := a.dataDir()
				writeFile(t, filepath.Join(d, adminTokenFile), "admin-token\n")
			}
			s, err := a.settings()
			if err != nil {
				t.Fatal(err)
			}
			if s.Hub != tt.wantHub || s.Token != tt.wantToken {
				t.Errorf("got hub %q token %q (from %s), want %q %q", s.Hub, s.Token, s.TokenFrom, tt.wantHub, tt.wantToken)
			}
		})
	}
}

func TestXDGDirs(t *testing.T) {
	env := map[string]string{"HOME": "/home/u", "XDG_DATA_HOME": "relative/ignored", "XDG_STATE_HOME": "/state"}
	a := newApp(Env{Getenv: func(k string) string { return env[k] }})
	for _, tt := range []struct {
		f    func() (string, error)
		want string
	}{
		{a.dataDir, "/home/u/.local/share/drover"},
		{a.configPath, "/home/u/.config/drover/client.json"},
		{a.runnerHome, "/state/drover/runner"},
		{a.localRunnerHome, "/state/drover/local"},
	} {
		if got, err := tt.f(); err != nil || got != tt.want {
			t.Errorf("got %q, %v; want %q", got, err, tt.want)
		}
	}
}

func TestConfigFileMode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "config", "drover")
	p := filepath.Join(dir, "client.json")
	for _, c := range []clientConfig{{Hub: "http://a:1", Token: "one"}, {Hub: "http://b:2", Token: "two"}} {
		if err := saveConfig(p, c); err != nil {
			t.Fatal(err)
		}
		assertMode(t, p, 0o600)
		assertMode(t, dir, 0o700)
		got, err := loadConfig(p)
		if err != nil || got != c {
			t.Errorf("loaded %+v, %v; want %+v", got, err, c)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
	if c, err := loadConfig(filepath.Join(dir, "missing.json")); err != nil || c != (clientConfig{}) {
		t.Errorf("missing config: %+v, %v", c, err)
	}
}

func TestReadToken(t *testing.T) {
	dir := t.TempDir()
	a := newApp(Env{})
	for _, tt := range []struct {
		content, want string
	}{
		{"drv_u_abc\n", "drv_u_abc"},
		{"  drv_u_abc  \n\n", "drv_u_abc"},
		{"", ""},
		{"two words", ""},
	} {
		p := filepath.Join(dir, "t")
		writeFile(t, p, tt.content)
		got, err := a.readToken(p)
		if got != tt.want || (err != nil) != (tt.want == "") {
			t.Errorf("readToken(%q) = %q, %v", tt.content, got, err)
		}
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func assertMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Mode().Perm(); got != want {
		t.Errorf("%s has mode %o, want %o", path, got, want)
	}
}
