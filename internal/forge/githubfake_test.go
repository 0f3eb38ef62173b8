package forge_test

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeGitHub is GitHub's REST API as drover uses it, over httptest: repositories with
// branches (a test sets a branch's commit as if it pushed it), pull requests, an App's
// installations and the tokens they mint. It answers as GitHub does: its status codes, JSON
// shapes, 422 bodies with errors: [{message: ...}] and rate-limit headers. It serves the API
// both at / (api.github.com) and under /api/v3 (an Enterprise Server).
type fakeGitHub struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	token    string                    // the personal access token it takes; "" for none
	appID    int64                     // the App whose JWTs it takes, 0 for none
	appKey   *rsa.PublicKey            // the App's public key
	installs map[string]int64          // OWNER/REPO: the App's installation there
	tokens   map[string]fakeGitHubMint // installation tokens minted
	tokenTTL time.Duration             // an installation token's life; an hour when 0
	repos    map[string]*fakeGitHubRepo
	nextID   int64
	// Faults, each taken by the next request it fits.
	dropCreates int                                               // creates answered by a dropped connection, after creating
	raceCreate  bool                                              // another opens the pull request just before the next create
	answer      func(w http.ResponseWriter, r *http.Request) bool // answers a request in GitHub's place when it returns true
	threads     fakeGitHubThreads                                 // issues, comments, reviews, checks, collaborators, hooks
	// What it saw.
	creates, mints, listCalls int
	paths                     []string // every request's path, as received
	errs                      []error  // the client's errors the test saw, checked for secrets at its end
	pemKey                    []byte   // the App's private key, a secret too
}

type fakeGitHubMint struct {
	install int64
	expires time.Time
	revoked bool
}

type fakeGitHubRepo struct {
	id          int64
	owner, name string
	def         string
	branches    map[string]string // name: commit
	pulls       []*fakeGitHubPull
}

type fakeGitHubPull struct {
	number             int
	head, base, sha    string
	headRepo, baseRepo *fakeGitHubRepo
	title, body        string
	draft              bool
	state              string
}

func newFakeGitHub(t *testing.T) *fakeGitHub {
	f := &fakeGitHub{t: t, installs: map[string]int64{}, tokens: map[string]fakeGitHubMint{},
		repos: map[string]*fakeGitHubRepo{}, nextID: 100}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /repos/{owner}/{repo}", f.getRepo)
	mux.HandleFunc("GET /repos/{owner}/{repo}/pulls", f.listPulls)
	mux.HandleFunc("POST /repos/{owner}/{repo}/pulls", f.createPull)
	mux.HandleFunc("GET /repos/{owner}/{repo}/pulls/{number}", f.getPull)
	mux.HandleFunc("GET /repos/{owner}/{repo}/installation", f.getInstallation)
	mux.HandleFunc("POST /app/installations/{id}/access_tokens", f.mint)
	f.threadRoutes(mux)
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.paths = append(f.paths, r.URL.Path)
		answer := f.answer
		f.mu.Unlock()
		if r.Header.Get("User-Agent") == "" {
			f.reply(w, http.StatusForbidden, map[string]any{"message": "Request forbidden by administrative rules. Please make sure your request has a User-Agent header"})
			return
		}
		if answer != nil && answer(w, r) {
			return
		}
		r.URL.Path = strings.TrimPrefix(r.URL.Path, "/api/v3")
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	t.Cleanup(func() {
		secrets := f.secrets()
		if len(f.pemKey) > 0 {
			body := strings.Join(strings.Split(string(f.pemKey), "\n")[1:4], "")
			secrets = append(secrets, body[:64])
		}
		for _, err := range f.errs {
			for _, s := range secrets {
				if strings.Contains(err.Error(), s) {
					t.Errorf("error %q holds a secret", err)
				}
			}
		}
	})
	return f
}

// seen keeps err, whose text the end of the test checks for secrets.
func (f *fakeGitHub) seen(err error) error {
	if err != nil {
		f.mu.Lock()
		f.errs = append(f.errs, err)
		f.mu.Unlock()
	}
	return err
}

// addRepo makes OWNER/NAME with its default branch at a commit.
func (f *fakeGitHub) addRepo(owner, name, def, sha string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	f.repos[owner+"/"+name] = &fakeGitHubRepo{id: f.nextID, owner: owner, name: name, def: def,
		branches: map[string]string{def: sha}}
}

// push sets a branch of OWNER/NAME to a commit.
func (f *fakeGitHub) push(repo, branch, sha string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.repos[repo].branches[branch] = sha
}

// revokeTokens ends every installation token minted so far before its time.
func (f *fakeGitHub) revokeTokens() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, m := range f.tokens {
		m.revoked = true
		f.tokens[k] = m
	}
}

// secrets is every credential the fake knows: none may be in an error.
func (f *fakeGitHub) secrets() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := []string{}
	if f.token != "" {
		s = append(s, f.token)
	}
	for k := range f.tokens {
		s = append(s, k)
	}
	return s
}

func (f *fakeGitHub) reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		f.t.Errorf("fake GitHub: encode: %v", err)
	}
}

func (f *fakeGitHub) fail(w http.ResponseWriter, status int, msg string, errs ...map[string]string) {
	body := map[string]any{"message": msg, "documentation_url": "https://docs.github.com/rest", "status": strconv.Itoa(status)}
	if len(errs) > 0 {
		body["errors"] = errs
	}
	f.reply(w, status, body)
}

// repo answers the request's repository when its credential reaches it (the caller holds
// f.mu); else it has answered as GitHub does: 401 for a bad credential, 404 for a
// repository there is none of, or the token may not see.
func (f *fakeGitHub) repo(w http.ResponseWriter, r *http.Request) *fakeGitHubRepo {
	name := r.PathValue("owner") + "/" + r.PathValue("repo")
	kind, cred, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if kind != "token" && kind != "Bearer" {
		f.fail(w, http.StatusUnauthorized, "Requires authentication")
		return nil
	}
	switch m, minted := f.tokens[cred]; {
	case f.token != "" && cred == f.token:
	case minted && !m.revoked && time.Now().Before(m.expires):
		if f.installs[name] != m.install {
			f.fail(w, http.StatusNotFound, "Not Found")
			return nil
		}
	default:
		f.fail(w, http.StatusUnauthorized, "Bad credentials")
		return nil
	}
	repo := f.repos[name]
	if repo == nil {
		f.fail(w, http.StatusNotFound, "Not Found")
	}
	return repo
}

// app checks the request's JWT is the App's (RS256 by its key, issued by its id, not
// expired), answering 401 when it is not.
func (f *fakeGitHub) app(w http.ResponseWriter, r *http.Request) bool {
	jwt, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	parts := strings.Split(jwt, ".")
	if f.appKey == nil || !ok || len(parts) != 3 {
		f.fail(w, http.StatusUnauthorized, "A JSON web token could not be decoded")
		return false
	}
	var head struct{ Alg string }
	var claims struct {
		Iss      string
		Exp, Iat int64
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err != nil || rsa.VerifyPKCS1v15(f.appKey, crypto.SHA256, sum[:], sig) != nil ||
		decodeJWTPart(parts[0], &head) != nil || head.Alg != "RS256" || decodeJWTPart(parts[1], &claims) != nil {
		f.fail(w, http.StatusUnauthorized, "A JSON web token could not be decoded")
		return false
	}
	now := time.Now().Unix()
	if claims.Iss != strconv.FormatInt(f.appID, 10) || claims.Exp < now || claims.Iat > now+60 || claims.Exp-claims.Iat > 600 {
		f.fail(w, http.StatusUnauthorized, "'Issuer' claim ('iss') must be the App's id, 'Expiration time' claim ('exp') is too far in the future or past")
		return false
	}
	return true
}

func decodeJWTPart(s string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func (f *fakeGitHub) getInstallation(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.app(w, r) {
		return
	}
	id, ok := f.installs[r.PathValue("owner")+"/"+r.PathValue("repo")]
	if !ok {
		f.fail(w, http.StatusNotFound, "Not Found")
		return
	}
	f.reply(w, http.StatusOK, map[string]any{"id": id, "app_id": f.appID})
}

func (f *fakeGitHub) mint(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.app(w, r) {
		return
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	found := false
	for _, i := range f.installs {
		found = found || i == id
	}
	if err != nil || !found {
		f.fail(w, http.StatusNotFound, "Not Found")
		return
	}
	ttl := f.tokenTTL
	if ttl == 0 {
		ttl = time.Hour
	}
	f.mints++
	tok := fmt.Sprintf("ghs_canary%030d", f.mints)
	f.tokens[tok] = fakeGitHubMint{install: id, expires: time.Now().Add(ttl)}
	f.reply(w, http.StatusCreated, map[string]any{"token": tok, "expires_at": time.Now().Add(ttl).UTC().Format(time.RFC3339)})
}

func (f *fakeGitHub) getRepo(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if repo := f.repo(w, r); repo != nil {
		f.reply(w, http.StatusOK, repo.json())
	}
}

func (repo *fakeGitHubRepo) json() map[string]any {
	return map[string]any{"id": repo.id, "name": repo.name, "full_name": repo.owner + "/" + repo.name,
		"owner": map[string]any{"login": repo.owner}, "default_branch": repo.def}
}

func (f *fakeGitHub) pullJSON(p *fakeGitHubPull) map[string]any {
	branch := func(repo *fakeGitHubRepo, ref, sha string) map[string]any {
		return map[string]any{"label": repo.owner + ":" + ref, "ref": ref, "sha": sha, "repo": repo.json()}
	}
	base := p.baseRepo
	return map[string]any{"number": p.number, "state": p.state, "draft": p.draft, "title": p.title, "body": p.body,
		"html_url": fmt.Sprintf("%s/%s/%s/pull/%d", f.srv.URL, base.owner, base.name, p.number),
		"head":     branch(p.headRepo, p.head, p.sha), "base": branch(base, p.base, base.branches[p.base])}
}

func (f *fakeGitHub) listPulls(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	repo := f.repo(w, r)
	if repo == nil {
		return
	}
	f.listCalls++
	q := r.URL.Query()
	var match []map[string]any
	for _, p := range repo.pulls {
		if s := q.Get("state"); s != "all" && p.state != "open" ||
			q.Get("head") != "" && q.Get("head") != p.headRepo.owner+":"+p.head ||
			q.Get("base") != "" && q.Get("base") != p.base {
			continue
		}
		match = append(match, f.pullJSON(p))
	}
	f.replyPage(w, r, match)
}

// replyPage answers a page of all, 30 a page unless ?per_page= says, with GitHub's Link
// header to the next.
func (f *fakeGitHub) replyPage(w http.ResponseWriter, r *http.Request, all []map[string]any) {
	f.reply(w, http.StatusOK, f.page(w, r, all))
}

// page is the page of all the request asks for, its Link header set.
func (f *fakeGitHub) page(w http.ResponseWriter, r *http.Request, all []map[string]any) []map[string]any {
	q := r.URL.Query()
	items, page, _, more := fakePage(q, all, 30)
	if more {
		next := *r.URL
		q.Set("page", strconv.Itoa(page+1))
		next.RawQuery = q.Encode()
		w.Header().Set("Link", fmt.Sprintf(`<%s%s>; rel="next"`, f.srv.URL, next.RequestURI()))
	}
	if items == nil {
		items = []map[string]any{}
	}
	return items
}

func (f *fakeGitHub) getPull(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	repo := f.repo(w, r)
	if repo == nil {
		return
	}
	n, _ := strconv.Atoi(r.PathValue("number"))
	for _, p := range repo.pulls {
		if p.number == n {
			f.reply(w, http.StatusOK, f.pullJSON(p))
			return
		}
	}
	f.fail(w, http.StatusNotFound, "Not Found")
}

func (f *fakeGitHub) createPull(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	repo := f.repo(w, r)
	if repo == nil {
		return
	}
	f.creates++
	var in struct {
		Title, Head, Base, Body string
		Draft                   bool
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		f.fail(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	if f.raceCreate {
		f.raceCreate = false
		f.open(repo, in.Head, in.Base, "opened by another", false)
	}
	headSHA, headOK := repo.branches[in.Head]
	baseSHA, baseOK := repo.branches[in.Base]
	switch {
	case !headOK:
		f.fail(w, http.StatusUnprocessableEntity, "Validation Failed",
			map[string]string{"resource": "PullRequest", "field": "head", "code": "invalid"})
		return
	case !baseOK:
		f.fail(w, http.StatusUnprocessableEntity, "Validation Failed",
			map[string]string{"resource": "PullRequest", "field": "base", "code": "invalid"})
		return
	case headSHA == baseSHA:
		f.fail(w, http.StatusUnprocessableEntity, "Validation Failed",
			map[string]string{"resource": "PullRequest", "code": "custom", "message": "No commits between " + in.Base + " and " + in.Head})
		return
	}
	for _, p := range repo.pulls {
		if p.state == "open" && p.head == in.Head && p.base == in.Base && p.headRepo == repo {
			f.fail(w, http.StatusUnprocessableEntity, "Validation Failed",
				map[string]string{"resource": "PullRequest", "code": "custom", "message": "A pull request already exists for " + repo.owner + ":" + in.Head + "."})
			return
		}
	}
	p := f.open(repo, in.Head, in.Base, in.Title, in.Draft)
	p.body = in.Body
	if f.dropCreates > 0 {
		f.dropCreates--
		// Created, and the answer lost: the connection closes before a byte of it.
		hangUp(f.t, w)
		return
	}
	f.reply(w, http.StatusCreated, f.pullJSON(p))
}

// open opens a pull request from a branch of repo (the caller holds f.mu).
func (f *fakeGitHub) open(repo *fakeGitHubRepo, head, base, title string, draft bool) *fakeGitHubPull {
	p := &fakeGitHubPull{number: len(repo.pulls) + 1, head: head, base: base, sha: repo.branches[head],
		headRepo: repo, baseRepo: repo, title: title, draft: draft, state: "open"}
	repo.pulls = append(repo.pulls, p)
	return p
}

// openPulls counts repo's open pull requests from head.
func (f *fakeGitHub) openPulls(repo, head string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, p := range f.repos[repo].pulls {
		if p.state == "open" && p.head == head {
			n++
		}
	}
	return n
}

// newAppKey is a fresh RSA key, in PEM as GitHub hands an App's out (PKCS #1).
func newAppKey(t *testing.T) (*rsa.PrivateKey, []byte) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
}

// fakePage is page ?page= of all, ?per_page= items a page (at most 100, else perDefault), as
// the fake forges list: the page's items, its number and size, and whether more follow.
func fakePage(q url.Values, all []map[string]any, perDefault int) (items []map[string]any, page, per int, more bool) {
	per, _ = strconv.Atoi(q.Get("per_page"))
	if per <= 0 || per > 100 {
		per = perDefault
	}
	page, _ = strconv.Atoi(q.Get("page"))
	page = max(page, 1)
	from := min((page-1)*per, len(all))
	to := min(from+per, len(all))
	return append([]map[string]any{}, all[from:to]...), page, per, to < len(all)
}
