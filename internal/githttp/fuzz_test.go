package githttp

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"drover/internal/gitcmd"
)

// Fuzz targets for what the transport reads from git clients: pkt-lines,
// push commands and paths. Each checks that the parser never panics or
// hangs, that a refusal is a client error, and round-trips where the format
// has one.

const zeroID = gitcmd.ZeroID

func pkt(s string) string {
	var b bytes.Buffer
	writePktLine(&b, s)
	return b.String()
}

func FuzzReadPktLine(f *testing.F) {
	for _, s := range []string{"0000", "0004", "0003", "0009hello", "000ahello\n0000", "ffff", "zzzz", "00", "", "0005", "+004", "0x04", pkt(strings.Repeat("x", 100))} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		br := bufio.NewReader(bytes.NewReader(data))
		read := 0
		for range 64 {
			line, flush, err := readPktLine(br)
			if err != nil {
				return
			}
			if flush {
				read += 4
				continue
			}
			if len(line) > 65535-4 {
				t.Fatalf("pkt-line payload of %d bytes", len(line))
			}
			// The line round-trips through writePktLine (the length's hex
			// digits may have come in upper case).
			var b bytes.Buffer
			writePktLine(&b, line)
			if got := string(data[read : read+b.Len()]); !strings.EqualFold(got, b.String()) || got[4:] != line {
				t.Fatalf("pkt-line %q re-encodes as %q", got, b.Bytes())
			}
			read += b.Len()
		}
	})
}

// pushSeeds are receive-pack command lists, well formed and not.
var pushSeeds = []string{
	pkt(zeroID+" 1111111111111111111111111111111111111111 refs/drover/uploads/u1\x00report-status side-band-64k\n") + "0000PACK",
	pkt(zeroID+" 1111111111111111111111111111111111111111 refs/heads/main\x00report-status\n") + "0000",
	pkt("1111111111111111111111111111111111111111 "+zeroID+" refs/drover/uploads/u1\x00report-status-v2 side-band\n") + "0000",
	pkt("shallow 1111111111111111111111111111111111111111") + pkt(zeroID+" 2222222222222222222222222222222222222222 refs/drover/uploads/x") + "0000",
	pkt("push-cert\x00report-status") + "0000",
	pkt("one two") + "0000",
	"0000",
	"00",
	pkt(zeroID+" 1111111111111111111111111111111111111111 refs/drover/uploads/../x\x00report-status\n") + "0000",
}

func FuzzReadPushCommands(f *testing.F) {
	for _, s := range pushSeeds {
		f.Add([]byte(s), false)
	}
	f.Add([]byte(pushSeeds[0]), true)
	f.Fuzz(func(t *testing.T, data []byte, gz bool) {
		if len(data) > 1<<16 {
			return
		}
		body, enc := io.Reader(bytes.NewReader(data)), ""
		if gz {
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			_, _ = zw.Write(data)
			_ = zw.Close()
			body, enc = &b, "gzip"
		}
		cmds, _, err := readPushCommands(body, enc)
		if err != nil {
			if e, ok := errors.AsType[*Error](err); !ok || e.Status >= 500 {
				t.Fatalf("refusal is not a 4xx: %v", err)
			}
			return
		}
		if len(cmds) > maxPushCommands {
			t.Fatalf("%d push commands accepted", len(cmds))
		}
		// The commands round-trip: written as pkt-lines they read back the same.
		var b bytes.Buffer
		for _, c := range cmds {
			if c.old == "" || c.new == "" || c.ref == "" || strings.ContainsAny(c.old+c.new+c.ref, " \t\n\x00") {
				t.Fatalf("malformed command accepted: %+v", c)
			}
			writePktLine(&b, c.old+" "+c.new+" "+c.ref+"\n")
		}
		b.WriteString("0000")
		again, _, err := readPushCommands(&b, "")
		if err != nil || len(again) != len(cmds) {
			t.Fatalf("commands do not round-trip: %v", err)
		}
		for i := range cmds {
			if again[i] != cmds[i] {
				t.Fatalf("command %+v reads back as %+v", cmds[i], again[i])
			}
		}

		// checkPush lets a push through only when every update is allowed;
		// a refusal with a status report is a whole pkt-line stream.
		w := httptest.NewRecorder()
		_, ok, err := checkPush(w, bytes.NewReader(data), "")
		if gz {
			return // checked above; the plain body may not parse
		}
		switch {
		case err != nil:
			if w.Body.Len() != 0 {
				t.Fatalf("an error reply also wrote %q", w.Body.Bytes())
			}
		case ok:
			for _, c := range cmds {
				if r := pushRefusal(c); r != "" {
					t.Fatalf("push of %+v let through: %s", c, r)
				}
				if !gitcmd.ValidUploadRef(c.ref) || c.old != zeroID || c.new == zeroID {
					t.Fatalf("push of %+v let through", c)
				}
			}
		default:
			br := bufio.NewReader(bytes.NewReader(w.Body.Bytes()))
			for {
				_, flush, err := readPktLine(br)
				if err != nil {
					t.Fatalf("status report is not pkt-lines: %v\n%q", err, w.Body.Bytes())
				}
				if flush {
					break
				}
			}
		}
	})
}

func FuzzParseGitPath(f *testing.F) {
	f.Add("GET", "/git/p/info/refs?service=git-upload-pack")
	f.Add("POST", "/git/p.git/git-receive-pack")
	f.Add("GET", "/git/../x/info/refs?service=git-receive-pack")
	f.Add("GET", "/git/p/HEAD")
	f.Add("POST", "/git/P/git-upload-pack")
	f.Fuzz(func(t *testing.T, method, target string) {
		if len(target) > 4096 {
			return
		}
		r, err := http.NewRequest(method, "http://hub"+target, nil)
		if err != nil {
			return
		}
		project, rest, svc, err := parseGitPath(r)
		if err != nil {
			if e, ok := errors.AsType[*Error](err); !ok || e.Status != http.StatusNotFound {
				t.Fatalf("refusal is not a 404: %v", err)
			}
			return
		}
		if !gitcmd.ValidProject(project) || strings.Contains(project, "/") {
			t.Fatalf("project %q accepted", project)
		}
		if svc.name != "git-upload-pack" && svc.name != "git-receive-pack" || svc.write != (svc.name == "git-receive-pack") {
			t.Fatalf("service %+v", svc)
		}
		if rest != "info/refs" && rest != svc.name {
			t.Fatalf("path %q accepted", rest)
		}
	})
}

// TestPushCommandsAreBounded: a push whose command list inflates (gzip) to
// far more than any real one is refused at once, not read to its end.
func TestPushCommandsAreBounded(t *testing.T) {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	line := []byte(pkt("shallow 1111111111111111111111111111111111111111"))
	for range (4 * maxPushHeader) / len(line) { // 4 MiB inflated
		_, _ = zw.Write(line)
	}
	_ = zw.Close()
	start := time.Now()
	_, _, err := readPushCommands(&b, "gzip")
	if e, ok := errors.AsType[*Error](err); !ok || e.Status != http.StatusForbidden || !strings.Contains(e.Msg, "over") {
		t.Fatalf("want a refusal over the bound, got %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("refusal took %v", d)
	}
	// A real command list still passes.
	cmds, _, err := readPushCommands(strings.NewReader(pushSeeds[0]), "")
	if err != nil || len(cmds) != 1 {
		t.Fatalf("%v %v", cmds, err)
	}
}
