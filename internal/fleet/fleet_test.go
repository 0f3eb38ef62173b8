package fleet

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestOpenNamesTheTargetsAndHosts(t *testing.T) {
	dir := t.TempDir()
	hosts := filepath.Join(dir, "hosts.json")
	if err := os.WriteFile(hosts, []byte(`{"hosts":[{"name":"gpu-box","ssh_host":"gpu"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c := Config{Binary: "/bin/true", StateDir: dir, HostsFile: hosts}
	if _, err := Open("nowhere", c); err == nil || !strings.Contains(err.Error(), "use --on with one of local, docker, podman, kubernetes, gpu-box") {
		t.Fatalf("unknown target: %v", err)
	}
	if tg, err := Open("gpu-box", c); err != nil {
		t.Fatal(err)
	} else if _, ok := tg.(*SSH); !ok {
		t.Fatalf("gpu-box opened as %T", tg)
	}
	if tg, err := Open("local", c); err != nil {
		t.Fatal(err)
	} else if _, ok := tg.(*Local); !ok {
		t.Fatalf("local opened as %T", tg)
	}
}

func TestHostsFileRefusesBadEntries(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"unknown field", `{"hosts":[{"name":"a","ssh_host":"a","forward":true}]}`, "unknown field"},
		{"no ssh host", `{"hosts":[{"name":"a"}]}`, "needs an ssh_host"},
		{"an option as host", `{"hosts":[{"name":"a","ssh_host":"-oProxyCommand=x"}]}`, "needs an ssh_host"},
		{"local", `{"hosts":[{"name":"local","ssh_host":"a"}]}`, "other than local"},
		{"bad name", `{"hosts":[{"name":"../a","ssh_host":"a"}]}`, "must be a name"},
	} {
		p := filepath.Join(t.TempDir(), "hosts.json")
		if err := os.WriteFile(p, []byte(tc.body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadHosts(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestSSHArgsFixTheSafetyOptionsBeforeTheHost(t *testing.T) {
	args := sshArgs(Host{SSHHost: "box", SSHConfig: "/cfg"}, "drover runner --stdio")
	joined := strings.Join(args, " ")
	for _, o := range []string{"StrictHostKeyChecking=yes", "BatchMode=yes", "ForwardAgent=no", "ForwardX11=no", "ClearAllForwardings=yes", "SendEnv=-*"} {
		if !strings.Contains(joined, "-o "+o) {
			t.Errorf("missing -o %s in %q", o, joined)
		}
	}
	// The host comes after "--", so no host name can be read as an option.
	if n := len(args); args[n-3] != "--" || args[n-2] != "box" || args[0] != "-F" {
		t.Fatalf("args %q", args)
	}
}

// TestTunnelCarriesConnections: HTTP requests from the far side's listener
// reach the "hub" through one byte stream each way, and the token line
// arrives first.
func TestTunnelCarriesConnections(t *testing.T) {
	hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hub saw "+r.URL.Path)
	}))
	defer hub.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	farIn, nearOut := io.Pipe()
	nearIn, farOut := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	near := make(chan error, 1)
	go func() {
		near <- ServeNear(ctx, nearIn, nearOut, "drv_g_x", strings.TrimPrefix(hub.URL, "http://"), log)
	}()
	far, err := OpenFarTunnel(farIn, farOut, log)
	if err != nil {
		t.Fatal(err)
	}
	defer far.Close()
	if far.Token != "drv_g_x" {
		t.Fatalf("token %q", far.Token)
	}
	for _, path := range []string{"/a", "/b", "/c"} {
		resp, err := http.Get(far.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "hub saw "+path {
			t.Fatalf("through the tunnel: %q", b)
		}
	}
	// The near side ending closes the far side's session.
	cancel()
	select {
	case <-far.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the far side did not see the session end")
	}
	<-near
}

func TestSSHWithoutTheClientSaysHowToInstallIt(t *testing.T) {
	tg := &SSH{procs: procs{bin: "/bin/true", dir: t.TempDir()}, host: Host{Name: "box", SSHHost: "box"}}
	err := tg.Check(context.Background())
	if err == nil || !strings.Contains(err.Error(), "apt-get install openssh-client") {
		t.Fatalf("check without ssh: %v", err)
	}
	if _, err := tg.Launch(context.Background(), Spec{LaunchID: "l-1", Hub: "http://127.0.0.1:1"}); err == nil {
		t.Fatal("launched without ssh")
	}
	if ins, _ := tg.List(context.Background()); len(ins) != 0 {
		t.Fatalf("something was started: %+v", ins)
	}
}

func TestSSHRefusesAnHTTPSHub(t *testing.T) {
	if _, err := hubAddr("https://hub.example"); err == nil || !strings.Contains(err.Error(), "plain http") {
		t.Fatalf("https hub: %v", err)
	}
	if a, err := hubAddr("http://hub.example"); err != nil || a != "hub.example:80" {
		t.Fatalf("http hub: %q %v", a, err)
	}
}
