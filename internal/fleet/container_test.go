package fleet

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/rules"
)

// fakeContainerEngine stands in for docker and podman, which cannot run
// containers here. It records each call's argv (\037-separated) and
// environment, and keeps containers as directories under $FAKE_DIR/c:
// run, ps --filter label=K[=V], inspect, logs, stop, rm, image inspect,
// pull (refused when $FAKE_PULL_REFUSE is set) and build.
const fakeContainerEngine = `#!/bin/sh
d="$FAKE_DIR"
for a in "$@"; do printf '%s\037' "$a"; done >> "$d/argv.log"
printf '\n' >> "$d/argv.log"
env >> "$d/env.log"
mkdir -p "$d/c" "$d/img"
img() { printf '%s' "$1" | tr '/:' '__'; }
case "$1" in
version) echo 1.0-fake ;;
image) [ -f "$d/img/$(img "$5")" ] || { echo "Error: No such image: $5" >&2; exit 1; }; echo sha256:fake ;;
pull)
	[ -n "$FAKE_PULL_REFUSE" ] && { printf 'Error response from daemon:\npull access denied for %s, repository does not exist\n' "$2" >&2; exit 1; }
	touch "$d/img/$(img "$2")" ;;
build) touch "$d/img/$(img "$3")" ;;
run)
	shift
	n=$(ls "$d/c" | wc -l); id="c$((n + 1))$(date +%N)"
	mkdir "$d/c/$id"
	while [ "$#" -gt 0 ]; do
		case "$1" in
		--detach) shift ;;
		--name) echo "$2" > "$d/c/$id/name"; shift 2 ;;
		--label) echo "$2" >> "$d/c/$id/labels"; shift 2 ;;
		--env-file) cp "$2" "$d/c/$id/env"; shift 2 ;;
		--pull|--network) shift 2 ;;
		*) break ;;
		esac
	done
	[ -f "$d/img/$(img "$1")" ] || { rm -r "$d/c/$id"; echo "Unable to find image '$1' locally" >&2; exit 125; }
	echo true > "$d/c/$id/running"
	echo "$id" ;;
ps)
	want="${6#label=}"
	for c in $(ls "$d/c"); do
		while read -r l; do
			case "$want" in
			*=*) [ "$l" = "$want" ] && echo "$c" ;;
			*) [ "${l%%=*}" = "$want" ] && echo "$c" ;;
			esac
		done < "$d/c/$c/labels"
	done | sort -u ;;
inspect)
	shift 3
	for c in "$@"; do
		l=$(grep '^drover.fleet.launch=' "$d/c/$c/labels" | cut -d= -f2)
		r=$(grep '^drover.fleet.runner=' "$d/c/$c/labels" | cut -d= -f2)
		echo "$l $r $(cat "$d/c/$c/running")"
	done ;;
logs) echo "runner $(cat "$d/c/$2/name") connected" ;;
stop) shift 3; for c in "$@"; do echo false > "$d/c/$c/running"; done ;;
rm) shift 2; for c in "$@"; do rm -r "$d/c/$c"; done ;;
esac
`

type fakeEngineDir string

// installFakeContainerEngine puts the fake on PATH as docker and podman.
func installFakeContainerEngine(t *testing.T) fakeEngineDir {
	dir := t.TempDir()
	for _, name := range []string{"docker", "podman"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(fakeContainerEngine), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir+":/usr/bin:/bin")
	t.Setenv("FAKE_DIR", dir)
	return fakeEngineDir(dir)
}

func (d fakeEngineDir) addImage(t *testing.T, image string) {
	if err := os.MkdirAll(filepath.Join(string(d), "img"), 0o755); err != nil {
		t.Fatal(err)
	}
	name := strings.NewReplacer("/", "_", ":", "_").Replace(image)
	if err := os.WriteFile(filepath.Join(string(d), "img", name), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

func (d fakeEngineDir) read(t *testing.T, name string) string {
	b, err := os.ReadFile(filepath.Join(string(d), name))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return string(b)
}

func (d fakeEngineDir) calls(t *testing.T, sub string) [][]string {
	var out [][]string
	for _, line := range strings.Split(strings.TrimSpace(d.read(t, "argv.log")), "\n") {
		c := strings.Split(strings.TrimSuffix(line, "\x1f"), "\x1f")
		if line != "" && c[0] == sub {
			out = append(out, c)
		}
	}
	return out
}

// containerDirs is the fake's containers by runner name.
func (d fakeEngineDir) containerDirs(t *testing.T) map[string]string {
	ents, _ := os.ReadDir(filepath.Join(string(d), "c"))
	out := map[string]string{}
	for _, e := range ents {
		p := filepath.Join(string(d), "c", e.Name())
		b, err := os.ReadFile(filepath.Join(p, "name"))
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimPrefix(strings.TrimSpace(string(b)), "drover-")] = p
	}
	return out
}

func containerSpec() Spec {
	return Spec{LaunchID: "l-abc", Hub: "http://hub.example:8080", Labels: map[string]string{"pool": "c"}, Slots: 2, MaxJobs: 1,
		Runners: []RunnerSpec{{Name: "l-abc-1", Token: "drr_secret-one"}, {Name: "l-abc-2", Token: "drr_secret-two"}}}
}

func TestContainerTargetLaunchesListsLogsAndStops(t *testing.T) {
	for _, engine := range []string{"docker", "podman"} {
		t.Run(engine, func(t *testing.T) {
			d := installFakeContainerEngine(t)
			d.addImage(t, "drover/runner:1")
			state := t.TempDir()
			tg, err := Open(engine, Config{StateDir: state, Image: "drover/runner:1", Network: "drover-net",
				Env: []string{"PATH=" + os.Getenv("PATH"), "FAKE_DIR=" + string(d), "DROVER_TOKEN=drt_launcher-secret"}})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			ins, err := tg.Launch(ctx, containerSpec())
			if err != nil {
				t.Fatal(err)
			}
			if len(ins) != 2 || !ins[0].Running || !strings.HasPrefix(ins[0].Where, engine+" c") {
				t.Fatalf("instances %+v", ins)
			}
			runs := d.calls(t, "run")
			want := []string{"run", "--detach", "--name", "drover-l-abc-1", "--label", "drover.fleet.launch=l-abc",
				"--label", "drover.fleet.runner=l-abc-1", "--pull", "never", "--env-file", filepath.Join(state, "l-abc", "l-abc-1", "registration.env"),
				"--network", "drover-net", "drover/runner:1", "drover", "runner", "--hub", "http://hub.example:8080",
				"--home", "/var/lib/drover", "--slots", "2", "--max-jobs", "1", "--labels", "pool=c"}
			if len(runs) != 2 || !slices.Equal(runs[0], want) {
				t.Fatalf("run argv\n got %q\nwant %q", runs, want)
			}
			// The tokens reach the containers through the env file only,
			// which is gone once the engine read it; no secret in any argv
			// or in the engine's environment.
			cs := d.containerDirs(t)
			for i, name := range []string{"l-abc-1", "l-abc-2"} {
				env, err := os.ReadFile(filepath.Join(cs[name], "env"))
				if err != nil || string(env) != "DROVER_REGISTRATION_TOKEN="+containerSpec().Runners[i].Token+"\n" {
					t.Fatalf("env file of %s: %q %v", name, env, err)
				}
				if _, err := os.Stat(filepath.Join(state, "l-abc", name, "registration.env")); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("the env file of %s is left: %v", name, err)
				}
			}
			if argv := d.read(t, "argv.log"); strings.Contains(argv, "secret") {
				t.Fatalf("a secret in the engine's argv: %q", argv)
			}
			if env := d.read(t, "env.log"); strings.Contains(env, "secret") || !strings.Contains(env, "FAKE_DIR=") {
				t.Fatalf("the engine's environment: %q", env)
			}

			list, err := tg.List(ctx)
			if err != nil || len(list) != 2 || !list[0].Running || list[0].LaunchID != "l-abc" {
				t.Fatalf("list %+v %v", list, err)
			}
			// An ephemeral runner that took its attempt exits: not running.
			if err := os.WriteFile(filepath.Join(cs["l-abc-1"], "running"), []byte("false\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			list, _ = tg.List(ctx)
			for _, in := range list {
				if in.Running != (in.Name == "l-abc-2") {
					t.Fatalf("after l-abc-1 exited: %+v", list)
				}
			}
			var logs strings.Builder
			if err := tg.Logs(ctx, "l-abc-2", &logs); err != nil || logs.String() != "runner drover-l-abc-2 connected\n" {
				t.Fatalf("logs %q %v", logs.String(), err)
			}

			if err := tg.Stop(ctx, "l-abc"); err != nil {
				t.Fatal(err)
			}
			if list, err := tg.List(ctx); err != nil || len(list) != 0 {
				t.Fatalf("after stop: %+v %v", list, err)
			}
			if st := d.calls(t, "stop"); len(st) != 1 || len(st[0]) != 5 || st[0][1] != "--time" {
				t.Fatalf("stop calls %q", st)
			}
			// What the runner printed outlives its container.
			logs.Reset()
			if err := tg.Logs(ctx, "l-abc-2", &logs); err != nil || logs.String() != "runner drover-l-abc-2 connected\n" {
				t.Fatalf("logs after stop %q %v", logs.String(), err)
			}
			if fi, err := os.Stat(filepath.Join(state, "l-abc", "l-abc-2", "runner.log")); err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("kept log: %v %v", fi, err)
			}
		})
	}
}

func TestContainerTargetPullsAMissingImageAndBuildsFromAContainerfile(t *testing.T) {
	d := installFakeContainerEngine(t)
	tg, err := NewContainer("docker", Config{StateDir: t.TempDir(), Image: "registry.example/drover:2", Env: os.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tg.Launch(context.Background(), Spec{LaunchID: "l-p", Hub: "http://h", Runners: []RunnerSpec{{Name: "l-p-1", Token: "drr_x"}}}); err != nil {
		t.Fatal(err)
	}
	if p := d.calls(t, "pull"); len(p) != 1 || p[0][1] != "registry.example/drover:2" {
		t.Fatalf("pull calls %q", p)
	}

	cf := filepath.Join(t.TempDir(), "Containerfile")
	if err := os.WriteFile(cf, []byte("FROM debian:stable-slim\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tb, err := NewContainer("podman", Config{StateDir: t.TempDir(), Containerfile: cf, Env: os.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Launch(context.Background(), Spec{LaunchID: "l-b", Hub: "http://h", Runners: []RunnerSpec{{Name: "l-b-1", Token: "drr_y"}}}); err != nil {
		t.Fatal(err)
	}
	b := d.calls(t, "build")
	if len(b) != 1 || !strings.HasPrefix(b[0][2], "drover-fleet:") || b[0][4] != cf {
		t.Fatalf("build calls %q", b)
	}
	if r := d.calls(t, "run"); len(r) != 2 || !slices.Contains(r[1], b[0][2]) {
		t.Fatalf("run calls %q, want the built image %s", r, b[0][2])
	}
}

func TestContainerTargetRefusesWithoutEngineOrImage(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	tg, _ := NewContainer("podman", Config{StateDir: t.TempDir(), Image: "x"})
	if err := tg.Check(context.Background()); err == nil || !strings.Contains(err.Error(), "needs the podman CLI on PATH") {
		t.Fatalf("no engine: %v", err)
	}
	installFakeContainerEngine(t)
	tg, _ = NewContainer("docker", Config{StateDir: t.TempDir(), Containerfile: filepath.Join(t.TempDir(), "Containerfile"), Env: os.Environ()})
	if err := tg.Check(context.Background()); err == nil || !strings.Contains(err.Error(), "--image is not set") {
		t.Fatalf("no image: %v", err)
	}
}

// A refused pull is a launch failure the hub is told, with the engine's
// reason as one line of plain text, and no container is started.
func TestContainerPullRefusedReachesTheHubAsALaunchFailure(t *testing.T) {
	d := installFakeContainerEngine(t)
	t.Setenv("FAKE_PULL_REFUSE", "1")
	tg, err := NewContainer("docker", Config{StateDir: t.TempDir(), Image: "registry.example/private:1", Env: os.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	reason := failedLaunchReason(t, tg, "docker")
	if !strings.Contains(reason, "image registry.example/private:1 is not here and pulling it failed") ||
		!strings.Contains(reason, "pull access denied for registry.example/private:1") {
		t.Fatalf("reason %q", reason)
	}
	if r := d.calls(t, "run"); len(r) != 0 {
		t.Fatalf("a container was started: %q", r)
	}
}

func TestFailureReasonIsOneLineOfPlainTextTheHubTakes(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"lines and controls", errors.New("pull failed:\n\x1b[31mdenied\x1b[0m\r\n\tretry"), "pull failed: [31mdenied [0m retry"},
		{"joined", errors.Join(errors.New("a"), errors.New("b")), "a b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := failureReason(tc.err); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
	long := failureReason(errors.New(strings.Repeat("é", 2000)))
	if len(long) > apitypes.MaxLaunchFailureReason || !strings.HasSuffix(long, "...") {
		t.Fatalf("long reason: %d bytes", len(long))
	}
	for _, r := range []string{long, failureReason(errors.New("x\x00y\x7f"))} {
		if err := rules.CheckPlainText("reason", r, false); err != nil {
			t.Fatalf("%q: %v", r, err)
		}
	}
}

// failedLaunchReason has an autoscaler launch one runner on tg for a
// queued job, and returns the reason of the launch failure the hub was
// told (one line of plain text), the launch revoked.
func failedLaunchReason(t *testing.T, tg Target, target string) string {
	t.Helper()
	hub := &steppedHub{ready: make(chan struct{}), queue: make(chan int), running: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := &Autoscaler{Hub: hub, Target: tg, TargetName: target, HubURL: "http://h", Max: 1, Slots: 1,
		IdleGrace: time.Second, Log: slog.New(slog.DiscardHandler)}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	<-hub.ready
	hub.queue <- 1
	<-hub.ready
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(hub.reasons) != 1 || len(hub.revoked) != 1 {
		t.Fatalf("reasons %q, revoked %q: want the failed launch reported and revoked", hub.reasons, hub.revoked)
	}
	if err := rules.CheckPlainText("reason", hub.reasons[0], false); err != nil {
		t.Fatalf("the reason is not one line of plain text: %v", err)
	}
	return hub.reasons[0]
}
