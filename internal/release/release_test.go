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

// A release of the host's architecture: the archive and SHA256SUMS agree,
// the binary in it reports the version given, and a second run at the same
// commit writes the same bytes.
func TestReleaseArchive(t *testing.T) {
	if testing.Short() {
		ciskip.Skipf(t, "-short: compiles the release binary")
	}
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skipf("releases are for linux/amd64 and linux/arm64, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	needTools(t)
	root := repoRoot(t)
	name := "drover-" + testVersion + "-linux-" + runtime.GOARCH + ".tar.gz"

	var sums []string
	for i := range 2 {
		out := filepath.Join(t.TempDir(), "dist")
		// --allow-dirty: the test runs in a developer's checkout too; both
		// runs see the same tree either way.
		if _, stderr, err := release(t, root, "--allow-dirty", "--arch", runtime.GOARCH, "--version", testVersion, "--out", out); err != nil {
			t.Fatalf("run %d: scripts/release: %v\n%s", i+1, err, stderr)
		}
		archive, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
		sum := sha256.Sum256(archive)
		want := hex.EncodeToString(sum[:]) + "  " + name + "\n"
		got, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Fatalf("run %d: SHA256SUMS = %q, want %q", i+1, got, want)
		}
		sums = append(sums, string(got))
		if i > 0 {
			continue
		}
		bin := extract(t, filepath.Join(out, name), strings.TrimSuffix(name, ".tar.gz")+"/drover")
		cmd := exec.Command(bin, "version")
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
		v, err := cmd.Output()
		if err != nil {
			t.Fatalf("drover version: %v", err)
		}
		if !strings.Contains(string(v), testVersion) {
			t.Errorf("drover version = %q, want %s", v, testVersion)
		}
	}
	if sums[0] != sums[1] {
		t.Errorf("two runs at the same commit differ:\n%s%s", sums[0], sums[1])
	}
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
