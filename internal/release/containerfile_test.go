package release

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"drover/internal/testkit"
)

// gemini-cli's package.json "engines": node >= 20.
const minNodeMajor = 20

// containerfile is what the test reads of deploy/Containerfile.
type containerfile struct {
	args     map[string]string // ARG NAME=DEFAULT
	installs map[string]string // npm install -g "PKG@${ARG}": PKG → ARG
	base     string            // the last FROM: the runtime image
}

var (
	argRe     = regexp.MustCompile(`^ARG\s+([A-Z0-9_]+)=(\S+)$`)
	installRe = regexp.MustCompile(`"((?:@[^/"\s]+/)?[^@"\s]+)@\$\{([A-Z0-9_]+)\}"`)
)

func parseContainerfile(text string) containerfile {
	cf := containerfile{args: map[string]string{}, installs: map[string]string{}}
	// Continuation lines make one instruction.
	for _, ins := range strings.Split(strings.ReplaceAll(text, "\\\n", " "), "\n") {
		ins = strings.TrimSpace(ins)
		if m := argRe.FindStringSubmatch(ins); m != nil {
			cf.args[m[1]] = m[2]
		}
		if f := strings.Fields(ins); len(f) >= 2 && f[0] == "FROM" {
			cf.base = f[1]
		}
		if strings.HasPrefix(ins, "RUN ") && strings.Contains(ins, "npm install -g") {
			for _, m := range installRe.FindAllStringSubmatch(ins, -1) {
				cf.installs[m[1]] = m[2]
			}
		}
	}
	return cf
}

// The image installs exactly the agent CLIs the suite pins, at the pinned
// versions by default, so an image built without --build-arg runs the pair
// the end-to-end tests ran.
func TestContainerfileAgentCLIsArePinned(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "..", "deploy", "Containerfile"))
	if err != nil {
		t.Fatal(err)
	}
	cf := parseContainerfile(string(text))
	pins, err := testkit.AgentCLIPins()
	if err != nil {
		t.Fatal(err)
	}
	if len(pins) == 0 {
		t.Fatal("scripts/agent-clis.txt pins nothing")
	}
	pinned := map[string]bool{}
	for _, p := range pins {
		i := strings.LastIndex(p, "@")
		if i <= 0 {
			t.Fatalf("pin %q is not package@version", p)
		}
		pkg, ver := p[:i], p[i+1:]
		pinned[pkg] = true
		arg, ok := cf.installs[pkg]
		if !ok {
			t.Errorf("deploy/Containerfile does not npm install %s (pinned %s in scripts/agent-clis.txt)", pkg, ver)
			continue
		}
		if got := cf.args[arg]; got != ver {
			t.Errorf("deploy/Containerfile: ARG %s=%q, scripts/agent-clis.txt pins %s@%s", arg, got, pkg, ver)
		}
	}
	for pkg := range cf.installs {
		if !pinned[pkg] {
			t.Errorf("deploy/Containerfile installs %s, which scripts/agent-clis.txt does not pin", pkg)
		}
	}
}

// The runtime base is an official node image new enough for every CLI.
func TestContainerfileNodeVersion(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "..", "deploy", "Containerfile"))
	if err != nil {
		t.Fatal(err)
	}
	base := parseContainerfile(string(text)).base
	m := regexp.MustCompile(`^node:(\d+)-`).FindStringSubmatch(base)
	if m == nil {
		t.Fatalf("runtime base %q is not a node:MAJOR-... image", base)
	}
	if n, _ := strconv.Atoi(m[1]); n < minNodeMajor {
		t.Errorf("runtime base %q: node %d, the Gemini CLI needs >= %d", base, n, minNodeMajor)
	}
}

// The parser itself, on the shapes the drift test relies on.
func TestParseContainerfile(t *testing.T) {
	cf := parseContainerfile(`FROM golang:1.26 AS build
FROM node:22-bookworm-slim
ARG A_VERSION=1.2.3
ARG B_VERSION=0.1.0
RUN npm install -g "@scope/a@${A_VERSION}" \
    "b@${B_VERSION}" \
 && npm cache clean --force
`)
	if cf.base != "node:22-bookworm-slim" {
		t.Errorf("base = %q", cf.base)
	}
	if cf.args["A_VERSION"] != "1.2.3" || cf.args["B_VERSION"] != "0.1.0" {
		t.Errorf("args = %v", cf.args)
	}
	if cf.installs["@scope/a"] != "A_VERSION" || cf.installs["b"] != "B_VERSION" || len(cf.installs) != 2 {
		t.Errorf("installs = %v", cf.installs)
	}
}
