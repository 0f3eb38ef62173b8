package hub

import (
	"net/http"
	"strings"
	"testing"

	"drover/internal/apitypes"
	"drover/internal/publish"
)

// TestSubmitFromPRRefusals: a submission naming a pull request is checked
// before the forge is called: a base as well, observe mode, a project
// mapped to no forge, a forge mapping that is only half given; nothing is
// made.
func TestSubmitFromPRRefusals(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	dir, base := sourceRepo(t)
	th.push(dir, "web", base)
	for _, tc := range []struct {
		name string
		req  apitypes.SubmitRequest
		code int
		want string
	}{
		{"base and pull request", apitypes.SubmitRequest{Repo: &apitypes.SubmitRepo{Project: "web", Base: base, FromPR: 3}},
			http.StatusBadRequest, "not both"},
		{"observe", apitypes.SubmitRequest{Repo: &apitypes.SubmitRepo{Project: "web", FromPR: 3}, Mode: "observe"},
			http.StatusBadRequest, "fix mode"},
		{"unmapped", apitypes.SubmitRequest{Repo: &apitypes.SubmitRepo{Project: "web", FromPR: 3}},
			http.StatusConflict, "mapped to no forge"},
		{"no project", apitypes.SubmitRequest{Repo: &apitypes.SubmitRepo{Project: "nope", FromPR: 3}},
			http.StatusNotFound, "no project"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, code, e := th.submitRepo(tc.req)
			if code != tc.code || !strings.Contains(e.Message, tc.want) {
				t.Errorf("code %d %+v, want %d with %q", code, e, tc.code, tc.want)
			}
		})
	}
	var list apitypes.JobList
	if code, e := th.call(th.admin, "GET", "/jobs", nil, &list); code != http.StatusOK || len(list.Jobs) != 0 {
		t.Fatalf("jobs after refusals: %d %+v %+v", code, e, list)
	}
	// A forge mapping needs a forge that exists.
	var cfg apitypes.ProjectConfig
	forge, repo := "gh", "acme/web"
	code, e := th.call(th.admin, "PUT", "/projects/web/config", apitypes.ProjectConfigRequest{Forge: &forge, ForgeRepo: &repo}, &cfg)
	if code != http.StatusBadRequest || !strings.Contains(e.Message, "no forge named") {
		t.Errorf("mapping to a missing forge: %d %+v", code, e)
	}
	var fv apitypes.ForgeView
	if code, e := th.call(th.admin, "PUT", "/forges/gh", apitypes.ForgeRequest{Kind: "gitea", URL: "http://127.0.0.1:9", Token: "t0ken"}, &fv); code != http.StatusOK {
		t.Fatalf("add forge: %d %+v", code, e)
	}
	// A subgroup is GitLab's alone: refused on Gitea, and the project stays unmapped.
	nested := "acme/team/web"
	if code, e := th.call(th.admin, "PUT", "/projects/web/config", apitypes.ProjectConfigRequest{Forge: &forge, ForgeRepo: &nested}, &cfg); code != http.StatusBadRequest ||
		!strings.Contains(e.Message, "only GitLab has subgroups") {
		t.Errorf("mapping to a nested repository on Gitea: %d %+v", code, e)
	}
	if code, e := th.call(th.admin, "GET", "/projects/web/config", nil, &cfg); code != http.StatusOK || cfg.Forge != "" || cfg.ForgeRepo != "" {
		t.Errorf("the config after a refused mapping: %d %+v %+v", code, e, cfg)
	}
	pub := "pr"
	if code, e := th.call(th.admin, "PUT", "/projects/web/config", apitypes.ProjectConfigRequest{Forge: &forge, ForgeRepo: &repo, Publish: &pub}, &cfg); code != http.StatusOK ||
		cfg.Forge != "gh" || cfg.ForgeRepo != "acme/web" || cfg.Publish != "pr" {
		t.Fatalf("mapping: %d %+v %+v", code, e, cfg)
	}
	// The project's owner may not point it at another repository of the
	// admin's forge credential.
	owner := th.addUser("olive")
	if err := th.pushAs(owner, dir, "olives", base); err != nil {
		t.Fatal(err)
	}
	other := "victim/repo"
	if code, e := th.call(owner, "PUT", "/projects/olives/config", apitypes.ProjectConfigRequest{Forge: &forge, ForgeRepo: &other}, &cfg); code != http.StatusForbidden ||
		!strings.Contains(e.Message, "only an admin") {
		t.Errorf("a non-admin remapping the forge repository: %d %+v", code, e)
	}
	if code, e := th.call(th.admin, "DELETE", "/forges/gh", nil, &fv); code != http.StatusConflict || !strings.Contains(e.Message, "web") {
		t.Errorf("removing a mapped forge: %d %+v", code, e)
	}
	// The forge is unreachable: the submission fails with the forge's
	// reason, never its token, and makes no job.
	_, code, e = th.submitRepo(apitypes.SubmitRequest{Repo: &apitypes.SubmitRepo{Project: "web", FromPR: 3}})
	if code != http.StatusBadGateway || e.Code != publish.CodeUnavailable || strings.Contains(e.Message, "t0ken") {
		t.Errorf("a pull request of an unreachable forge: %d %+v", code, e)
	}
	if code, _ := th.call(th.admin, "GET", "/jobs", nil, &list); code != http.StatusOK || len(list.Jobs) != 0 {
		t.Fatalf("jobs after an unreachable forge: %+v", list)
	}
}
