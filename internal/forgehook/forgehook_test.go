package forgehook_test

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"drover/internal/forge"
	"drover/internal/forgehook"
)

var secret = []byte("s3cret-for-tests")

func read(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func TestParseSamples(t *testing.T) {
	for _, tc := range []struct {
		file string
		kind string
		h    http.Header
		want forgehook.Event
	}{
		{"github_issues_labeled.json", forge.KindGitHub, header("X-GitHub-Event", "issues", "X-GitHub-Delivery", "d-1"),
			forgehook.Event{Delivery: "d-1", Type: forgehook.Labeled, Repo: "octo-org/widgets", Number: 42,
				Title: "Crash when the config file is empty", Actor: "maintainer", Label: "drover:fix", Labels: []string{"bug", "drover:fix"}}},
		{"github_issues_assigned.json", forge.KindGitHub, header("X-GitHub-Event", "issues", "X-GitHub-Delivery", "d-2"),
			forgehook.Event{Delivery: "d-2", Type: forgehook.Assigned, Repo: "octo-org/widgets", Number: 43,
				Title: "Add a --quiet flag", Actor: "maintainer", Assignee: "drover-bot"}},
		{"github_issue_comment.json", forge.KindGitHub, header("X-GitHub-Event", "issue_comment", "X-GitHub-Delivery", "d-3"),
			forgehook.Event{Delivery: "d-3", Type: forgehook.Commented, Repo: "octo-org/widgets", Number: 7, IsPR: true,
				Title: "Use the new parser", Actor: "maintainer", CommentID: 5550001,
				Body: "/drover run --agent claude fix the failing test\nIt fails on Windows only."}},
		{"github_pull_request_review.json", forge.KindGitHub, header("X-GitHub-Event", "pull_request_review", "X-GitHub-Delivery", "d-4"),
			forgehook.Event{Delivery: "d-4", Type: forgehook.Reviewed, Repo: "octo-org/widgets", Number: 7, IsPR: true,
				Title: "Use the new parser", Actor: "reviewer", CommentID: 880011, Body: "Please handle the empty case.",
				ReviewState: forgehook.ReviewChangesRequested, HeadSHA: "3f2a9c1d4e5b6a7980c1d2e3f4a5b6c7d8e9f001", HeadBranch: "drover/j-abc"}},
		{"github_ping.json", forge.KindGitHub, header("X-GitHub-Event", "ping", "X-GitHub-Delivery", "d-5"),
			forgehook.Event{Delivery: "d-5", Type: forgehook.Ping}},
		{"github_issues_labeled.json", forge.KindGitHub, header("X-GitHub-Event", "push", "X-GitHub-Delivery", "d-6"),
			forgehook.Event{Delivery: "d-6", Type: forgehook.Ignored}},
		{"gitea_issue_label.json", forge.KindGitea, header("X-Gitea-Event", "issues", "X-Gitea-Event-Type", "issue_label", "X-Gitea-Delivery", "g-1"),
			forgehook.Event{Delivery: "g-1", Type: forgehook.Labeled, Repo: "alice/tools", Number: 3,
				Title: "Typo in the help text", Actor: "alice", Labels: []string{"drover:fix"}}},
		{"gitea_issue_comment.json", forge.KindGitea, header("X-Gitea-Event", "issue_comment", "X-Gitea-Event-Type", "issue_comment", "X-Gitea-Delivery", "g-2"),
			forgehook.Event{Delivery: "g-2", Type: forgehook.Commented, Repo: "alice/tools", Number: 3,
				Title: "Typo in the help text", Actor: "bob", CommentID: 77, Body: "> /drover cancel\nquoted, so not a command"}},
		{"gitea_pull_request_review_rejected.json", forge.KindGitea,
			header("X-Gitea-Event", "pull_request_rejected", "X-Gitea-Event-Type", "pull_request_review_rejected", "X-Gitea-Delivery", "g-3"),
			forgehook.Event{Delivery: "g-3", Type: forgehook.Reviewed, Repo: "alice/tools", Number: 9, IsPR: true,
				Title: "Fix the typo", Actor: "alice", Body: "Also fix 'adress'.", ReviewState: forgehook.ReviewChangesRequested,
				HeadSHA: "aa11bb22cc33dd44ee55ff6677889900aabbccdd", HeadBranch: "drover/j-1"}},
		{"gitlab_issue_labeled.json", forge.KindGitLab, header("X-Gitlab-Event", "Issue Hook", "X-Gitlab-Event-UUID", "l-1"),
			forgehook.Event{Delivery: "l-1", Type: forgehook.Labeled, Repo: "team/api", Number: 23,
				Title: "Timeouts on /health", Actor: "carol", Label: "drover:fix", Labels: []string{"drover:fix"}}},
		{"gitlab_note_mr.json", forge.KindGitLab, header("X-Gitlab-Event", "Note Hook", "Idempotency-Key", "l-2"),
			forgehook.Event{Delivery: "l-2", Type: forgehook.Commented, Repo: "team/api", Number: 4, IsPR: true,
				Title: "Raise the timeout", Actor: "carol", CommentID: 1244, Body: "/drover address",
				HeadSHA: "bb11bb22cc33dd44ee55ff6677889900aabbccdd", HeadBranch: "drover/j-9"}},
	} {
		t.Run(tc.file+"/"+tc.want.Delivery, func(t *testing.T) {
			got, err := forgehook.Parse(tc.kind, tc.h, read(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestGitLabDiffNoteIsAReviewComment: a note on a merge request's diff is a
// review comment, never a conversation comment (which may answer a job's
// question).
func TestGitLabDiffNoteIsAReviewComment(t *testing.T) {
	body := bytes.Replace(read(t, "gitlab_note_mr.json"), []byte(`"noteable_type": "MergeRequest",`),
		[]byte(`"noteable_type": "MergeRequest", "type": "DiffNote",`), 1)
	ev, err := forgehook.Parse(forge.KindGitLab, header("X-Gitlab-Event", "Note Hook", "Idempotency-Key", "l-3"), body)
	if err != nil || ev.Type != forgehook.ReviewComment || ev.Number != 4 || !ev.IsPR {
		t.Fatalf("a DiffNote: %+v, %v", ev, err)
	}
}

// TestGitLabSubgroupProject: a project in a subgroup arrives as its whole path, at
// the longest the forge package names one.
func TestGitLabSubgroupProject(t *testing.T) {
	long := strings.Repeat(strings.Repeat("g", forge.MaxOwner)+"/", forge.MaxNesting) + strings.Repeat("r", forge.MaxRepoName)
	for _, path := range []string{"team/platform/api", long} {
		body := bytes.Replace(read(t, "gitlab_note_mr.json"), []byte(`"path_with_namespace": "team/api"`),
			[]byte(`"path_with_namespace": "`+path+`"`), 1)
		ev, err := forgehook.Parse(forge.KindGitLab, header("X-Gitlab-Event", "Note Hook", "Idempotency-Key", "l-4"), body)
		if err != nil || ev.Repo != path {
			t.Errorf("a note in %d-byte %.40s...: repo %q, %v", len(path), path, ev.Repo, err)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	gh := header("X-GitHub-Event", "issues", "X-GitHub-Delivery", "d-1")
	labeled := read(t, "github_issues_labeled.json")
	for _, tc := range []struct {
		name, kind string
		h          http.Header
		body       []byte
		want       string
	}{
		{"no delivery id", forge.KindGitHub, header("X-GitHub-Event", "issues"), labeled, "no delivery id"},
		{"control in delivery id", forge.KindGitHub, header("X-GitHub-Event", "issues", "X-GitHub-Delivery", "a\x1bb"), labeled, "control character"},
		{"not JSON", forge.KindGitHub, gh, []byte("{not json"), "invalid character"},
		{"trailing data", forge.KindGitHub, gh, append(bytes.Clone(labeled), []byte(" {}")...), "after"},
		{"key twice", forge.KindGitHub, gh, []byte(`{"action":"labeled","action":"closed"}`), "duplicate key"},
		{"oversized", forge.KindGitHub, gh, bytes.Repeat([]byte(" "), forgehook.MaxBody+1), "webhook body"},
		{"no repository", forge.KindGitHub, gh, []byte(`{"action":"labeled","issue":{"number":1},"label":{"name":"x"},"sender":{"login":"a"}}`), "no repository"},
		{"no number", forge.KindGitHub, gh, []byte(`{"action":"labeled","issue":{},"label":{"name":"x"},"sender":{"login":"a"},"repository":{"full_name":"o/r"}}`), "number"},
		{"unknown kind", "bitbucket", gh, labeled, "forge kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := forgehook.Parse(tc.kind, tc.h, tc.body)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestVerify(t *testing.T) {
	body := read(t, "github_issues_labeled.json")
	good := forgehook.Sign(secret, body)
	flip := func(s string, i int) string {
		b := []byte(s)
		if b[i] == '0' {
			b[i] = '1'
		} else {
			b[i] = '0'
		}
		return string(b)
	}
	for _, tc := range []struct {
		name, kind string
		h          http.Header
		secret     []byte
		ok         bool
	}{
		{"github right", forge.KindGitHub, header("X-Hub-Signature-256", good), secret, true},
		{"github missing", forge.KindGitHub, header(), secret, false},
		{"github last digit wrong", forge.KindGitHub, header("X-Hub-Signature-256", flip(good, len(good)-1)), secret, false},
		{"github first digit wrong", forge.KindGitHub, header("X-Hub-Signature-256", flip(good, len("sha256="))), secret, false},
		{"github short", forge.KindGitHub, header("X-Hub-Signature-256", good[:20]), secret, false},
		{"github not hex", forge.KindGitHub, header("X-Hub-Signature-256", "sha256=zz"), secret, false},
		{"github other secret", forge.KindGitHub, header("X-Hub-Signature-256", good), []byte("other"), false},
		{"github no secret", forge.KindGitHub, header("X-Hub-Signature-256", forgehook.Sign(nil, body)), nil, false},
		{"gitea own header", forge.KindGitea, header("X-Gitea-Signature", strings.TrimPrefix(good, "sha256=")), secret, true},
		{"gitea github header", forge.KindGitea, header("X-Hub-Signature-256", good), secret, true},
		{"gitea wrong own header wins", forge.KindGitea, header("X-Gitea-Signature", strings.Repeat("0", 64), "X-Hub-Signature-256", good), secret, false},
		{"gitea missing", forge.KindGitea, header(), secret, false},
		{"gitea header without sha256=", forge.KindGitea, header("X-Hub-Signature-256", strings.TrimPrefix(good, "sha256=")), secret, false},
		{"gitlab right", forge.KindGitLab, header("X-Gitlab-Token", string(secret)), secret, true},
		{"gitlab wrong", forge.KindGitLab, header("X-Gitlab-Token", "s3cret-for-testz"), secret, false},
		{"gitlab prefix", forge.KindGitLab, header("X-Gitlab-Token", "s3cret"), secret, false},
		{"gitlab missing", forge.KindGitLab, header(), secret, false},
		{"gitlab empty secret", forge.KindGitLab, header("X-Gitlab-Token", ""), []byte{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := forgehook.Verify(tc.kind, tc.secret, tc.h, body)
			if tc.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tc.ok && !errors.Is(err, forgehook.ErrSignature) {
				t.Fatalf("err %v, want ErrSignature", err)
			}
		})
	}
	if err := forgehook.Verify(forge.KindGitHub, secret, header("X-Hub-Signature-256", good), append(body, ' ')); !errors.Is(err, forgehook.ErrSignature) {
		t.Fatalf("a changed body passed: %v", err)
	}
}

// TestVerifyConstantTime reads the source: every comparison of a secret
// or a signature goes through hmac.Equal or subtle.ConstantTimeCompare.
func TestVerifyConstantTime(t *testing.T) {
	src, err := os.ReadFile("forgehook.go")
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	start := strings.Index(s, "func Verify(")
	end := strings.Index(s, "// Sign is")
	if start < 0 || end < start {
		t.Fatal("Verify and verifyHMAC not found in forgehook.go")
	}
	body := s[start:end]
	for _, must := range []string{"hmac.Equal(", "subtle.ConstantTimeCompare("} {
		if !strings.Contains(body, must) {
			t.Errorf("Verify does not use %s", must)
		}
	}
	for _, bad := range []string{"bytes.Equal(", "== want", "== string(secret)", "sig ==", "got =="} {
		if strings.Contains(body, bad) {
			t.Errorf("Verify compares with %q, not in constant time", bad)
		}
	}
}

func TestParseCommand(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		ok         bool
		want       forgehook.Command
		err        string
	}{
		{"run", "/drover run fix the test", true, forgehook.Command{Verb: "run", Prompt: "fix the test"}, ""},
		{"run with agent", "/drover run --agent claude fix it\nmore detail\r\n", true,
			forgehook.Command{Verb: "run", Agent: "claude", Prompt: "fix it\nmore detail"}, ""},
		{"run agent=", "/drover run --agent=codex go", true, forgehook.Command{Verb: "run", Agent: "codex", Prompt: "go"}, ""},
		{"run --", "/drover run -- --agent is text here", true, forgehook.Command{Verb: "run", Prompt: "--agent is text here"}, ""},
		{"prompt on later lines may hold anything", "/drover run\nrun `make test`; fix $PATH", true,
			forgehook.Command{Verb: "run", Prompt: "run `make test`; fix $PATH"}, ""},
		{"retry", "/drover retry", true, forgehook.Command{Verb: "retry"}, ""},
		{"cancel crlf", "/drover cancel\r\nthanks", true, forgehook.Command{Verb: "cancel"}, ""},
		{"address", "/drover address", true, forgehook.Command{Verb: "address"}, ""},
		{"address with the review's words below", "/drover address\r\nrename it `x` too\n", true,
			forgehook.Command{Verb: "address", Prompt: "rename it `x` too"}, ""},
		{"address with words on its line", "/drover address now", true, forgehook.Command{}, "takes nothing"},
		{"not first line", "thanks!\n/drover run fix it", false, forgehook.Command{}, ""},
		{"quoted", "> /drover run fix it", false, forgehook.Command{}, ""},
		{"indented code", "    /drover run fix it", false, forgehook.Command{}, ""},
		{"fenced code", "```\n/drover run fix it\n```", false, forgehook.Command{}, ""},
		{"mention", "see /drover docs", false, forgehook.Command{}, ""},
		{"other word", "/droverx run", false, forgehook.Command{}, ""},
		{"empty", "", false, forgehook.Command{}, ""},
		{"semicolon", "/drover run fix; rm -rf /", true, forgehook.Command{}, "shell syntax"},
		{"backtick", "/drover run `id`", true, forgehook.Command{}, "shell syntax"},
		{"dollar", "/drover run $(id)", true, forgehook.Command{}, "shell syntax"},
		{"pipe", "/drover retry | sh", true, forgehook.Command{}, "shell syntax"},
		{"redirect", "/drover run fix > /etc/passwd", true, forgehook.Command{}, "shell syntax"},
		{"unknown flag", "/drover run --model big fix", true, forgehook.Command{}, "unknown flag"},
		{"short flag", "/drover run -a claude fix", true, forgehook.Command{}, "unknown flag"},
		{"agent twice", "/drover run --agent a --agent b x", true, forgehook.Command{}, "twice"},
		{"bad agent", "/drover run --agent ../x y", true, forgehook.Command{}, "agent"},
		{"agent without name", "/drover run --agent", true, forgehook.Command{}, "needs an agent"},
		{"no prompt", "/drover run --agent claude", true, forgehook.Command{}, "needs a prompt"},
		{"unknown verb", "/drover deploy", true, forgehook.Command{}, "unknown command"},
		{"nothing", "/drover", true, forgehook.Command{}, "no command"},
		{"retry with args", "/drover retry now", true, forgehook.Command{}, "takes nothing"},
		{"control char", "/drover run fix\x1b[2J", true, forgehook.Command{}, "control character"},
		{"too long", "/drover run " + strings.Repeat("a", 2000), true, forgehook.Command{}, "command line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := forgehook.ParseCommand(forgehook.DefaultPrefix, tc.body)
			if ok != tc.ok {
				t.Fatalf("ok %v, want %v (err %v)", ok, tc.ok, err)
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestCheckPrefix(t *testing.T) {
	for p, ok := range map[string]bool{"/drover": true, "@bot": true, "!do": true, "drover": false, "/": false, "/a b": false, "/$x": false} {
		if err := forgehook.CheckPrefix(p); (err == nil) != ok {
			t.Errorf("CheckPrefix(%q) = %v, want ok %v", p, err, ok)
		}
	}
}

// bounded runs fn and fails when it allocated more than a small multiple
// of the input's size: parsing stays linear in what the forge sent.
func bounded(t *testing.T, size int, fn func()) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(64*size+1<<20); got > limit {
		t.Fatalf("allocated %d bytes for %d bytes of input (limit %d)", got, size, limit)
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"github_issues_labeled.json", "github_issue_comment.json", "github_pull_request_review.json"} {
		f.Add(forge.KindGitHub, "issues", read(f, name))
	}
	f.Add(forge.KindGitea, "issue_label", read(f, "gitea_issue_label.json"))
	f.Add(forge.KindGitea, "pull_request_review_rejected", read(f, "gitea_pull_request_review_rejected.json"))
	f.Add(forge.KindGitLab, "Note Hook", read(f, "gitlab_note_mr.json"))
	f.Add(forge.KindGitLab, "Issue Hook", []byte(`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[`))
	f.Fuzz(func(t *testing.T, kind, event string, body []byte) {
		h := header("X-GitHub-Event", event, "X-Gitea-Event-Type", event, "X-Gitlab-Event", event,
			"X-GitHub-Delivery", "d", "X-Gitea-Delivery", "d", "X-Gitlab-Event-UUID", "d")
		var ev forgehook.Event
		var err error
		bounded(t, len(body), func() { ev, err = forgehook.Parse(kind, h, body) })
		if err != nil {
			return
		}
		if len(ev.Body) > forgehook.MaxText || len(ev.Title) > forgehook.MaxTitle {
			t.Fatalf("an event over its bounds: body %d, title %d", len(ev.Body), len(ev.Title))
		}
		if ev.Type != forgehook.Ignored && ev.Type != forgehook.Ping && (ev.Repo == "" || ev.Number <= 0 || ev.Actor == "") {
			t.Fatalf("an actionable event without its repository, number or actor: %+v", ev)
		}
	})
}

func FuzzParseCommand(f *testing.F) {
	for _, s := range []string{"/drover run --agent claude fix\nmore", "/drover retry", "> /drover cancel", "/drover run $(id)",
		"/drover run --agent=" + strings.Repeat("a", 100), "/drover " + strings.Repeat("--agent a ", 200)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var (
			cmd Command
			ok  bool
			err error
		)
		bounded(t, len(body), func() { cmd, ok, err = forgehook.ParseCommand(forgehook.DefaultPrefix, body) })
		first, _, _ := strings.Cut(body, "\n")
		if ok != strings.HasPrefix(first, forgehook.DefaultPrefix) && ok {
			t.Fatalf("a command whose first line does not start with the prefix: %q", body)
		}
		if err != nil || !ok {
			return
		}
		first = strings.TrimSuffix(first, "\r")
		if strings.ContainsAny(first, "`$;|&<>\\(){}") {
			t.Fatalf("a command line with shell characters passed: %q", first)
		}
		switch cmd.Verb {
		case "run", "retry", "cancel", "address":
		default:
			t.Fatalf("unknown verb %q passed", cmd.Verb)
		}
	})
}

type Command = forgehook.Command
