package release

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"drover/internal/testkit/ciskip"
)

const testVersion = "v0.0.0-releasetest"

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// needTools skips (or with CI=true fails) without what scripts/release runs.
func needTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"bash", "git", "tar", "gzip", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			ciskip.Skipf(t, "scripts/release needs %s: %v", tool, err)
		}
	}
}

// release runs scripts/release in dir (a checkout) with args.
func release(t *testing.T, dir string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(dir, "scripts", "release"), args...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// A release of the host's architecture: the two archives (the full build
// and the runner host's) and SHA256SUMS agree, each binary reports the
// version given, and a second run at the same commit writes the same bytes.
func TestReleaseArchive(t *testing.T) {
	if testing.Short() {
		ciskip.Skipf(t, "-short: compiles the release binary")
	}
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skipf("releases are for linux/amd64 and linux/arm64, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	needTools(t)
	root := repoRoot(t)
	names := []string{
		"drover-" + testVersion + "-linux-" + runtime.GOARCH + ".tar.gz",
		"drover-runner-" + testVersion + "-linux-" + runtime.GOARCH + ".tar.gz",
	}

	var sums []string
	for i := range 2 {
		out := filepath.Join(t.TempDir(), "dist")
		// --allow-dirty: the test runs in a developer's checkout too; both
		// runs see the same tree either way.
		if _, stderr, err := release(t, root, "--allow-dirty", "--arch", runtime.GOARCH, "--version", testVersion, "--out", out); err != nil {
			t.Fatalf("run %d: scripts/release: %v\n%s", i+1, err, stderr)
		}
		var want strings.Builder
		for _, name := range names {
			archive, err := os.ReadFile(filepath.Join(out, name))
			if err != nil {
				t.Fatalf("run %d: %v", i+1, err)
			}
			sum := sha256.Sum256(archive)
			want.WriteString(hex.EncodeToString(sum[:]) + "  " + name + "\n")
		}
		got, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want.String() {
			t.Fatalf("run %d: SHA256SUMS = %q, want %q", i+1, got, want.String())
		}
		sums = append(sums, string(got))
		if i > 0 {
			continue
		}
		for _, name := range names {
			bin := extract(t, filepath.Join(out, name), strings.TrimSuffix(name, ".tar.gz")+"/drover")
			if v := runDrover(t, bin, "version"); !strings.Contains(v, testVersion) {
				t.Errorf("%s: drover version = %q, want %s", name, v, testVersion)
			}
		}
		checkRunnerBuild(t, extract(t, filepath.Join(out, names[1]), strings.TrimSuffix(names[1], ".tar.gz")+"/drover"))
	}
	if sums[0] != sums[1] {
		t.Errorf("two runs at the same commit differ:\n%s%s", sums[0], sums[1])
	}
}

// runnerHostLimit is issue 30's bound on the binary a runner host gets:
// 80 MB.
const runnerHostLimit = 80_000_000

// checkRunnerBuild: the runner host's build runs a runner and drover's
// tools but links none of the hub's store drivers or the Kubernetes client,
// says where the hub is when asked for one, and stays under the bound.
func checkRunnerBuild(t *testing.T, bin string) {
	t.Helper()
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("runner host's build: %d bytes", fi.Size())
	if fi.Size() >= runnerHostLimit {
		t.Errorf("the runner host's build is %d bytes, want under %d (80 MB)", fi.Size(), runnerHostLimit)
	}
	mods, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	for _, m := range []string{"k8s.io/client-go", "modernc.org/sqlite", "github.com/jackc/pgx", "github.com/prometheus/client_golang"} {
		if strings.Contains(string(mods), "\t"+m) {
			t.Errorf("the runner host's build links %s", m)
		}
	}
	for _, args := range [][]string{{"runner", "--help"}, {"tool", "--help"}, {"sandbox", "--help"}} {
		runDrover(t, bin, args...)
	}
	cmd := exec.Command(bin, "hub")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not in this build") {
		t.Errorf("drover hub in the runner host's build: %v, %q; want a refusal saying it is not in this build", err, out)
	}
}

// runDrover runs bin with args in an empty home and returns its stdout.
func runDrover(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("drover %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// extract writes member of the .tar.gz archive to a temporary file and
// returns its path.
func extract(t *testing.T, archive, member string) string {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("%s holds no %s", archive, member)
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name != member {
			continue
		}
		if h.Uid != 0 || h.Gid != 0 || h.Mode&0o111 == 0 {
			t.Errorf("%s: uid %d gid %d mode %o, want root's and executable", member, h.Uid, h.Gid, h.Mode)
		}
		path := filepath.Join(t.TempDir(), "drover")
		out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, tr); err != nil {
			t.Fatal(err)
		}
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
		return path
	}
}

// Bad input is refused before anything is built or written: one line on
// stderr, a non-zero exit, no output directory.
func TestReleaseRefuses(t *testing.T) {
	needTools(t)
	// A throwaway repository holding only the script, so the dirty tree is
	// the test's own and nothing compiles.
	dir := t.TempDir()
	script, err := os.ReadFile(filepath.Join(repoRoot(t), "scripts", "release"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "scripts", "release"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-C", dir}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	git("add", ".")
	git("commit", "-qm", "script")
	if err := os.WriteFile(filepath.Join(dir, "uncommitted"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"dirty tree", nil, "uncommitted changes"},
		{"unknown flag", []string{"--allow-dirty", "--fast"}, "unknown argument --fast"},
		{"unknown arch", []string{"--allow-dirty", "--arch", "mips"}, "unsupported --arch mips"},
		{"flag without value", []string{"--allow-dirty", "--version"}, "--version needs a value"},
		{"bad version", []string{"--allow-dirty", "--version", "1.0/../x"}, "bad version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "dist")
			_, stderr, err := release(t, dir, append([]string{"--out=" + out}, tc.args...)...)
			if err == nil {
				t.Fatal("scripts/release succeeded")
			}
			if !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("stderr = %q, want one line with %q", stderr, tc.want)
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("output directory written: %v", err)
			}
		})
	}
}
