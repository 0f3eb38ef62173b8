//go:build !drover_nokube && !drover_runner

package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
)

// fakeKubeAPI stands in for a Kubernetes API server, which cannot run
// here: an httptest server speaking the REST paths the kubernetes target
// uses (Jobs, Secrets, Pods and pod logs: create, get, list by label
// selector, delete), so the real client-go transport and codecs are
// exercised. It records every object and request, makes a pod for each
// Job, and moves pods Pending → Running on the next look, or, for an
// image in pullFail, to a container waiting in ErrImagePull and then
// ImagePullBackOff.
type fakeKubeAPI struct {
	t        *testing.T
	srv      *httptest.Server
	mu       sync.Mutex
	pullFail map[string]bool
	secrets  map[string]*corev1.Secret
	jobs     map[string]*batchv1.Job
	pods     map[string]*corev1.Pod
	looks    map[string]int // pod lists that saw each pod
	requests []string       // "METHOD path?query" and bodies
	deletes  []string       // "kind/name propagation"
}

func newFakeKubeAPI(t *testing.T) *fakeKubeAPI {
	f := &fakeKubeAPI{t: t, pullFail: map[string]bool{}, secrets: map[string]*corev1.Secret{},
		jobs: map[string]*batchv1.Job{}, pods: map[string]*corev1.Pod{}, looks: map[string]int{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// kubeconfig writes a kubeconfig that points client-go at the fake.
func (f *fakeKubeAPI) kubeconfig(ns string) string {
	p := filepath.Join(f.t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: %q}}]
users: [{name: fake, user: {token: fake-cluster-token}}]
contexts: [{name: fake, context: {cluster: fake, user: fake, namespace: %s}}]
current-context: fake
`, f.srv.URL, ns)
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		f.t.Fatal(err)
	}
	return p
}

func (f *fakeKubeAPI) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	body, _ := io.ReadAll(r.Body)
	f.requests = append(f.requests, r.Method+" "+r.URL.RequestURI()+" "+string(body))
	// /api/v1/namespaces/NS/KIND[/NAME[/log]] or /apis/batch/v1/namespaces/NS/jobs[/NAME]
	p := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/apis/batch/v1"), "/api/v1")
	parts := strings.Split(strings.Trim(p, "/"), "/")
	if len(parts) < 3 || parts[0] != "namespaces" {
		http.Error(w, "fakeKubeAPI: unsupported path "+r.URL.Path, http.StatusNotFound)
		return
	}
	ns, kind, name := parts[1], parts[2], ""
	if len(parts) > 3 {
		name = parts[3]
	}
	switch {
	case r.Method == http.MethodPost && name == "":
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.create(w, ns, obj)
	case r.Method == http.MethodGet && len(parts) == 5 && kind == "pods" && parts[4] == "log":
		if f.pods[name] == nil {
			f.status(w, http.StatusNotFound, "pods", name)
			return
		}
		fmt.Fprintf(w, "runner %s connected\n", f.pods[name].Labels[labelRunner])
	case r.Method == http.MethodGet && name == "":
		sel, err := labels.Parse(r.URL.Query().Get("labelSelector"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.list(w, kind, sel)
	case r.Method == http.MethodDelete && name != "":
		var opts metav1.DeleteOptions
		if len(body) > 0 {
			if _, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, &opts); err != nil {
				http.Error(w, "fakeKubeAPI: delete options: "+err.Error(), http.StatusBadRequest)
				return
			}
		}
		prop := ""
		if opts.PropagationPolicy != nil {
			prop = string(*opts.PropagationPolicy)
		}
		f.deletes = append(f.deletes, kind+"/"+name+" "+prop)
		switch kind {
		case "secrets":
			if f.secrets[name] == nil {
				f.status(w, http.StatusNotFound, kind, name)
				return
			}
			delete(f.secrets, name)
		case "jobs":
			if f.jobs[name] == nil {
				f.status(w, http.StatusNotFound, kind, name)
				return
			}
			delete(f.jobs, name)
			if prop != "" && prop != string(metav1.DeletePropagationOrphan) {
				for n, pod := range f.pods {
					if pod.Labels["job-name"] == name {
						delete(f.pods, n)
					}
				}
			}
		}
		f.status(w, http.StatusOK, kind, name)
	default:
		http.Error(w, "fakeKubeAPI: unsupported "+r.Method+" "+r.URL.Path, http.StatusMethodNotAllowed)
	}
}

func (f *fakeKubeAPI) create(w http.ResponseWriter, ns string, obj runtime.Object) {
	switch o := obj.(type) {
	case *corev1.Secret:
		o.Namespace = ns
		f.secrets[o.Name] = o
		f.reply(w, http.StatusCreated, o, "v1", "Secret")
	case *batchv1.Job:
		o.Namespace = ns
		f.jobs[o.Name] = o
		pl := map[string]string{"job-name": o.Name}
		for k, v := range o.Spec.Template.Labels {
			pl[k] = v
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: o.Name + "-x1", Namespace: ns, Labels: pl},
			Spec: o.Spec.Template.Spec, Status: corev1.PodStatus{Phase: corev1.PodPending}}
		f.pods[pod.Name] = pod
		f.reply(w, http.StatusCreated, o, "batch/v1", "Job")
	default:
		http.Error(w, fmt.Sprintf("fakeKubeAPI: cannot create %T", obj), http.StatusBadRequest)
	}
}

// advance moves a pod one step along its simulated phases.
func (f *fakeKubeAPI) advance(p *corev1.Pod) {
	f.looks[p.Name]++
	if f.looks[p.Name] < 2 {
		return
	}
	c := p.Spec.Containers[0]
	if f.pullFail[c.Image] {
		reason := "ErrImagePull"
		if f.looks[p.Name] > 2 {
			reason = "ImagePullBackOff"
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: c.Name, Image: c.Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason,
				Message: fmt.Sprintf("failed to pull image %q: pull access denied, repository does not exist", c.Image)}}}}
		return
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: c.Name, Image: c.Image, Ready: true,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	for _, j := range f.jobs {
		if j.Name == p.Labels["job-name"] {
			j.Status.Active = 1
		}
	}
}

func (f *fakeKubeAPI) list(w http.ResponseWriter, kind string, sel labels.Selector) {
	match := func(m metav1.Object) bool { return sel.Matches(labels.Set(m.GetLabels())) }
	switch kind {
	case "secrets":
		l := &corev1.SecretList{}
		for _, n := range sortedKeys(f.secrets) {
			if match(f.secrets[n]) {
				l.Items = append(l.Items, *f.secrets[n])
			}
		}
		f.reply(w, http.StatusOK, l, "v1", "SecretList")
	case "jobs":
		l := &batchv1.JobList{}
		for _, n := range sortedKeys(f.jobs) {
			if match(f.jobs[n]) {
				l.Items = append(l.Items, *f.jobs[n])
			}
		}
		f.reply(w, http.StatusOK, l, "batch/v1", "JobList")
	case "pods":
		l := &corev1.PodList{}
		for _, n := range sortedKeys(f.pods) {
			if match(f.pods[n]) {
				f.advance(f.pods[n])
				l.Items = append(l.Items, *f.pods[n])
			}
		}
		f.reply(w, http.StatusOK, l, "v1", "PodList")
	default:
		http.Error(w, "fakeKubeAPI: cannot list "+kind, http.StatusNotFound)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func (f *fakeKubeAPI) status(w http.ResponseWriter, code int, kind, name string) {
	st := metav1.Status{Status: metav1.StatusSuccess, Code: int32(code)}
	if code != http.StatusOK {
		st = metav1.Status{Status: metav1.StatusFailure, Code: int32(code), Reason: metav1.StatusReasonNotFound,
			Message: fmt.Sprintf("%s %q not found", kind, name)}
	}
	f.reply(w, code, &st, "v1", "Status")
}

func (f *fakeKubeAPI) reply(w http.ResponseWriter, code int, obj runtime.Object, apiVersion, kind string) {
	obj.GetObjectKind().SetGroupVersionKind(schema.FromAPIVersionAndKind(apiVersion, kind))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if err := json.NewEncoder(w).Encode(obj); err != nil {
		f.t.Error(err)
	}
}

func (f *fakeKubeAPI) counts() (secrets, jobs, pods int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.secrets), len(f.jobs), len(f.pods)
}

func kubeTarget(t *testing.T, f *fakeKubeAPI, image string) *Kubernetes {
	k, err := NewKubernetes(Config{Image: image, Kube: KubeConfig{Kubeconfig: f.kubeconfig("runners"), Poll: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestKubernetesTargetLaunchesListsLogsAndStops(t *testing.T) {
	f := newFakeKubeAPI(t)
	tg := kubeTarget(t, f, "registry.example/drover:1")
	ctx := context.Background()
	ins, err := tg.Launch(ctx, containerSpec())
	if err != nil {
		t.Fatal(err)
	}
	if len(ins) != 2 || ins[0].Where != "kubernetes runners/drover-l-abc-1" {
		t.Fatalf("instances %+v", ins)
	}

	f.mu.Lock()
	for i, name := range []string{"l-abc-1", "l-abc-2"} {
		token := containerSpec().Runners[i].Token
		sec, job := f.secrets["drover-"+name], f.jobs["drover-"+name]
		if sec == nil || job == nil || sec.Namespace != "runners" || job.Namespace != "runners" {
			t.Fatalf("%s: secret %v job %v", name, sec, job)
		}
		if string(sec.Data[kubeTokenKey]) != token {
			t.Fatalf("secret of %s holds %q", name, sec.Data)
		}
		want := map[string]string{labelApp: appRunner, labelLaunch: "l-abc", labelRunner: name}
		for _, l := range []map[string]string{sec.Labels, job.Labels, job.Spec.Template.Labels} {
			for k, v := range want {
				if l[k] != v {
					t.Fatalf("%s: labels %v, want %v", name, l, want)
				}
			}
		}
		pod := job.Spec.Template.Spec
		c := pod.Containers[0]
		wantArgs := []string{"runner", "--hub", "http://hub.example:8080", "--home", "/var/lib/drover",
			"--registration-token-file", "/var/run/drover/registration/token", "--slots", "2", "--max-jobs", "1", "--labels", "pool=c"}
		if c.Image != "registry.example/drover:1" || !slices.Equal(c.Args, wantArgs) || len(c.Env) != 0 || len(c.EnvFrom) != 0 {
			t.Fatalf("%s container %+v", name, c)
		}
		if pod.Volumes[0].Secret == nil || pod.Volumes[0].Secret.SecretName != "drover-"+name || pod.RestartPolicy != corev1.RestartPolicyNever {
			t.Fatalf("%s pod spec %+v", name, pod)
		}
		for res, q := range map[corev1.ResourceName]string{corev1.ResourceCPU: "500m", corev1.ResourceMemory: "1Gi"} {
			if got := c.Resources.Requests[res]; got.String() != q {
				t.Fatalf("%s request %s = %s, want %s", name, res, got.String(), q)
			}
		}
		if got := c.Resources.Limits[corev1.ResourceMemory]; got.String() != "4Gi" {
			t.Fatalf("%s memory limit %s", name, got.String())
		}
		if *job.Spec.BackoffLimit != 0 {
			t.Fatalf("%s backoffLimit %d", name, *job.Spec.BackoffLimit)
		}
	}
	// The tokens travel only in the Secrets' bodies: no other request
	// carries them.
	for _, r := range f.requests {
		if strings.Contains(r, "secret-one") || strings.Contains(r, "secret-two") {
			if !strings.HasPrefix(r, "POST /api/v1/namespaces/runners/secrets ") {
				t.Fatalf("a token outside a Secret: %.300q", r)
			}
		}
	}
	f.mu.Unlock()

	list, err := tg.List(ctx)
	if err != nil || len(list) != 2 || !list[0].Running || list[0].LaunchID != "l-abc" || list[1].Name != "l-abc-2" {
		t.Fatalf("list %+v %v", list, err)
	}
	var logs strings.Builder
	if err := tg.Logs(ctx, "l-abc-2", &logs); err != nil || logs.String() != "runner l-abc-2 connected\n" {
		t.Fatalf("logs %q %v", logs.String(), err)
	}

	if err := tg.Stop(ctx, "l-abc"); err != nil {
		t.Fatal(err)
	}
	if s, j, p := f.counts(); s+j+p != 0 {
		t.Fatalf("after stop: %d secrets, %d jobs, %d pods left", s, j, p)
	}
	f.mu.Lock()
	for _, d := range f.deletes {
		if strings.HasPrefix(d, "jobs/") && !strings.HasSuffix(d, " Foreground") {
			t.Errorf("job deleted without propagation: %q", d)
		}
	}
	f.mu.Unlock()
	if list, err := tg.List(ctx); err != nil || len(list) != 0 {
		t.Fatalf("after stop: %+v %v", list, err)
	}
}

// An image that cannot be pulled is a launch failure whose reason the hub
// is told (and shows on the waiting jobs); the Jobs and Secrets go.
func TestKubernetesImagePullFailureReachesTheHubAndCleansUp(t *testing.T) {
	f := newFakeKubeAPI(t)
	f.pullFail["registry.example/private:1"] = true
	tg := kubeTarget(t, f, "registry.example/private:1")
	reason := failedLaunchReason(t, tg, "kubernetes")
	if !strings.Contains(reason, "ErrImagePull") || !strings.Contains(reason, "pull access denied") {
		t.Fatalf("reason %q", reason)
	}
	if s, j, p := f.counts(); s+j+p != 0 {
		t.Fatalf("after the failed launch: %d secrets, %d jobs, %d pods left", s, j, p)
	}
}

func TestKubernetesTargetRefusesWithoutClusterConfigOrImage(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	tg, err := NewKubernetes(Config{Image: "x"})
	if err != nil {
		t.Fatal(err)
	}
	err = tg.Check(context.Background())
	if err == nil || !strings.Contains(err.Error(), "needs a cluster config: pass --kubeconfig FILE, set $KUBECONFIG") {
		t.Fatalf("no cluster config: %v", err)
	}
	if _, err := tg.Launch(context.Background(), containerSpec()); err == nil {
		t.Fatal("launched without a cluster config")
	}

	f := newFakeKubeAPI(t)
	if err := kubeTarget(t, f, "").Check(context.Background()); err == nil || !strings.Contains(err.Error(), "needs --image") {
		t.Fatalf("no image: %v", err)
	}
	if _, err := NewKubernetes(Config{Image: "x", Kube: KubeConfig{Resources: KubeResources{CPURequest: "lots"}}}); err == nil ||
		!strings.Contains(err.Error(), `--cpu-request "lots" is not a Kubernetes quantity`) {
		t.Fatalf("bad quantity: %v", err)
	}
	if s, j, p := f.counts(); s+j+p != 0 {
		t.Fatalf("something was created: %d secrets, %d jobs, %d pods", s, j, p)
	}
}

// TestOpenKubernetes: a default build opens the kubernetes target.
func TestOpenKubernetes(t *testing.T) {
	c := Config{Binary: "/bin/true", StateDir: t.TempDir(), HostsFile: filepath.Join(t.TempDir(), "hosts.json")}
	if tg, err := Open("kubernetes", c); err != nil {
		t.Fatal(err)
	} else if _, ok := tg.(*Kubernetes); !ok {
		t.Fatalf("kubernetes opened as %T", tg)
	}
}
