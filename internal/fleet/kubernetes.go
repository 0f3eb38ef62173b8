//go:build !drover_nokube && !drover_runner

package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"drover/internal/rules"
)

// Kubernetes runs each runner as a Job of one pod, through the cluster's
// API. The registration token is in a Secret of its own, mounted as a
// file the runner reads: never in the pod's args or env. Jobs, pods and
// Secrets carry the fleet labels (and app.kubernetes.io/name), which
// List and Stop select by and NetworkPolicies can match. Launch waits
// for the pods to start, so an image that cannot be pulled is a launch
// failure with its reason, and nothing of the launch is left.
type Kubernetes struct {
	kubeconfig string
	namespace  string
	image      string
	resources  corev1.ResourceRequirements
	// poll is how often Launch and Stop look at the pods; startTimeout
	// bounds how long Launch waits for them.
	poll, startTimeout time.Duration
}

const (
	labelApp        = "app.kubernetes.io/name"
	appRunner       = "drover-runner"
	kubeTokenDir    = "/var/run/drover/registration"
	kubeTokenKey    = "token"
	kubeStartWait   = 5 * time.Minute
	kubePollDefault = 2 * time.Second
)

// openKubernetes is the kubernetes target of a build with Kubernetes
// support (the default; see kubernetes_none.go).
func openKubernetes(c Config) (Target, error) {
	k, err := NewKubernetes(c)
	if err != nil {
		return nil, err
	}
	return k, nil
}

// NewKubernetes makes the kubernetes target; the cluster is reached only
// by Check and the calls after it.
func NewKubernetes(c Config) (*Kubernetes, error) {
	r := c.Kube.Resources
	if r == (KubeResources{}) {
		r = DefaultKubeResources()
	}
	res := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	for _, q := range []struct {
		flag, v string
		list    corev1.ResourceList
		name    corev1.ResourceName
	}{
		{"--cpu-request", r.CPURequest, res.Requests, corev1.ResourceCPU},
		{"--memory-request", r.MemoryRequest, res.Requests, corev1.ResourceMemory},
		{"--cpu-limit", r.CPULimit, res.Limits, corev1.ResourceCPU},
		{"--memory-limit", r.MemoryLimit, res.Limits, corev1.ResourceMemory},
	} {
		if q.v == "" {
			continue
		}
		v, err := resource.ParseQuantity(q.v)
		if err != nil {
			return nil, fmt.Errorf("%s %q is not a Kubernetes quantity (e.g. 500m, 2, 1Gi): %w", q.flag, q.v, err)
		}
		q.list[q.name] = v
	}
	k := &Kubernetes{kubeconfig: c.Kube.Kubeconfig, namespace: c.Kube.Namespace, image: c.Image, resources: res,
		poll: c.Kube.Poll, startTimeout: c.Kube.StartTimeout}
	if k.poll <= 0 {
		k.poll = kubePollDefault
	}
	if k.startTimeout <= 0 {
		k.startTimeout = kubeStartWait
	}
	return k, nil
}

// client is the clientset and namespace from --kubeconfig, $KUBECONFIG,
// ~/.kube/config or the pod's in-cluster config, in that order.
func (k *Kubernetes) client() (kubernetes.Interface, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{Context: clientcmdapi.Context{Namespace: k.namespace}})
	cfg, err := cc.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, "", errors.New("the kubernetes target needs a cluster config: pass --kubeconfig FILE, set $KUBECONFIG, or run drover inside the cluster")
		}
		return nil, "", fmt.Errorf("load the cluster config: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("find the namespace: %w (pass --namespace)", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("make the cluster client: %w", err)
	}
	return cs, ns, nil
}

func (k *Kubernetes) Check(ctx context.Context) error {
	if k.image == "" {
		return errors.New("the kubernetes target needs --image: a registry image built from deploy/Containerfile")
	}
	cs, ns, err := k.client()
	if err != nil {
		return err
	}
	if _, err := cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return fmt.Errorf("list Jobs in namespace %s: %w (check the cluster config and the RBAC in deploy/kubernetes)", ns, err)
	}
	return nil
}

// objectName is the Job's and Secret's name of a runner.
func objectName(runner string) (string, error) {
	n := "drover-" + runner
	if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
		return "", fmt.Errorf("runner name %q cannot name a Kubernetes object: %s", runner, strings.Join(errs, "; "))
	}
	return n, nil
}

func runnerLabels(launchID, runner string) map[string]string {
	return map[string]string{labelApp: appRunner, labelLaunch: launchID, labelRunner: runner}
}

func (k *Kubernetes) Launch(ctx context.Context, s Spec) ([]Instance, error) {
	if err := k.Check(ctx); err != nil {
		return nil, err
	}
	cs, ns, err := k.client()
	if err != nil {
		return nil, err
	}
	if errs := validation.IsValidLabelValue(s.LaunchID); len(errs) > 0 {
		return nil, fmt.Errorf("launch %q cannot be a label value: %s", s.LaunchID, strings.Join(errs, "; "))
	}
	var out []Instance
	for _, r := range s.Runners {
		in, err := k.start(ctx, cs, ns, s, r)
		if err == nil {
			out = append(out, in)
			continue
		}
		return nil, errors.Join(fmt.Errorf("start runner %s: %w", r.Name, err), k.Stop(context.WithoutCancel(ctx), s.LaunchID))
	}
	if err := k.waitStarted(ctx, cs, ns, s); err != nil {
		return nil, errors.Join(err, k.Stop(context.WithoutCancel(ctx), s.LaunchID))
	}
	return out, nil
}

func (k *Kubernetes) start(ctx context.Context, cs kubernetes.Interface, ns string, s Spec, r RunnerSpec) (Instance, error) {
	name, err := objectName(r.Name)
	if err != nil {
		return Instance{}, err
	}
	if errs := validation.IsValidLabelValue(r.Name); len(errs) > 0 {
		return Instance{}, fmt.Errorf("runner %q cannot be a label value: %s", r.Name, strings.Join(errs, "; "))
	}
	labels := runnerLabels(s.LaunchID, r.Name)
	meta := metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}
	sec := &corev1.Secret{ObjectMeta: meta, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{kubeTokenKey: []byte(r.Token)}}
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		return Instance{}, fmt.Errorf("create Secret %s: %w", name, err)
	}
	never, one := int32(0), int32(1)
	readOnly := int32(0o400)
	job := &batchv1.Job{ObjectMeta: meta, Spec: batchv1.JobSpec{
		// A runner's registration token is single-use: a retried pod could
		// not register, so a failed pod stays failed.
		BackoffLimit: &never, Parallelism: &one, Completions: &one,
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{
				RestartPolicy:                corev1.RestartPolicyNever,
				AutomountServiceAccountToken: new(bool),
				Containers: []corev1.Container{{
					Name: "runner", Image: k.image, Command: []string{"drover"},
					Args:      runnerArgs(s, containerHome, kubeTokenDir+"/"+kubeTokenKey),
					Resources: k.resources,
					VolumeMounts: []corev1.VolumeMount{
						{Name: "registration", MountPath: kubeTokenDir, ReadOnly: true},
						{Name: "home", MountPath: containerHome},
					},
				}},
				Volumes: []corev1.Volume{
					{Name: "registration", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: name, DefaultMode: &readOnly}}},
					{Name: "home", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				},
			},
		},
	}}
	if _, err := cs.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		return Instance{}, fmt.Errorf("create Job %s: %w", name, err)
	}
	return Instance{LaunchID: s.LaunchID, Name: r.Name, Running: true, Where: "kubernetes " + ns + "/" + name}, nil
}

// pullFailures are the container waiting reasons no wait will cure.
var pullFailures = map[string]bool{"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true,
	"ErrImageNeverPull": true, "CreateContainerConfigError": true}

// waitStarted returns once every runner's pod has started, or with the
// reason one cannot.
func (k *Kubernetes) waitStarted(ctx context.Context, cs kubernetes.Interface, ns string, s Spec) error {
	ctx, cancel := context.WithTimeout(ctx, k.startTimeout)
	defer cancel()
	t := time.NewTicker(k.poll)
	defer t.Stop()
	for {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labelLaunch + "=" + s.LaunchID})
		if err != nil {
			return fmt.Errorf("watch the runner pods of launch %s: %w", s.LaunchID, err)
		}
		started := map[string]bool{}
		waiting := ""
		for _, p := range pods.Items {
			runner := p.Labels[labelRunner]
			switch p.Status.Phase {
			case corev1.PodRunning, corev1.PodSucceeded:
				started[runner] = true
				continue
			case corev1.PodFailed:
				return fmt.Errorf("runner pod %s failed: %s %s", p.Name, p.Status.Reason, p.Status.Message)
			}
			for _, c := range p.Status.ContainerStatuses {
				if w := c.State.Waiting; w != nil {
					if pullFailures[w.Reason] {
						return fmt.Errorf("runner pod %s cannot start: %s: %s", p.Name, w.Reason, w.Message)
					}
					waiting = w.Reason
				}
			}
		}
		if len(started) == len(s.Runners) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the runner pods of launch %s did not start within %s (%d of %d started; last waiting reason %q)",
				s.LaunchID, k.startTimeout, len(started), len(s.Runners), waiting)
		case <-t.C:
		}
	}
}

func (k *Kubernetes) jobs(ctx context.Context, cs kubernetes.Interface, ns, launchID string) ([]batchv1.Job, error) {
	sel := labelRunner
	if launchID != "" {
		if !rules.ValidName(launchID) {
			return nil, fmt.Errorf("launch %q is not a valid name", launchID)
		}
		sel = labelLaunch + "=" + launchID
	}
	l, err := cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list runner Jobs: %w", err)
	}
	return l.Items, nil
}

func (k *Kubernetes) List(ctx context.Context) ([]Instance, error) {
	cs, ns, err := k.client()
	if err != nil {
		return nil, err
	}
	jobs, err := k.jobs(ctx, cs, ns, "")
	if err != nil {
		return nil, err
	}
	var out []Instance
	for _, j := range jobs {
		out = append(out, Instance{LaunchID: j.Labels[labelLaunch], Name: j.Labels[labelRunner],
			Running: j.Status.Active > 0 || (j.Status.Succeeded == 0 && j.Status.Failed == 0),
			Where:   "kubernetes " + ns + "/" + j.Name})
	}
	return out, nil
}

// Stop deletes the launch's Jobs (their pods with them: the runners get
// SIGTERM, their attempts go back to the queue) and Secrets, and returns
// once no pod of the launch is left.
func (k *Kubernetes) Stop(ctx context.Context, launchID string) error {
	cs, ns, err := k.client()
	if err != nil {
		return err
	}
	jobs, err := k.jobs(ctx, cs, ns, launchID)
	if err != nil {
		return err
	}
	sel := metav1.ListOptions{LabelSelector: labelLaunch + "=" + launchID}
	fg := metav1.DeletePropagationForeground
	var errs []error
	for _, j := range jobs {
		if err := cs.BatchV1().Jobs(ns).Delete(ctx, j.Name, metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
			errs = append(errs, fmt.Errorf("delete Job %s: %w", j.Name, err))
		}
	}
	secs, err := cs.CoreV1().Secrets(ns).List(ctx, sel)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("list the launch's Secrets: %w", err))...)
	}
	for _, sc := range secs.Items {
		if err := cs.CoreV1().Secrets(ns).Delete(ctx, sc.Name, metav1.DeleteOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("delete Secret %s: %w", sc.Name, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	t := time.NewTicker(k.poll)
	defer t.Stop()
	for {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, sel)
		if err != nil {
			return fmt.Errorf("list the launch's pods: %w", err)
		}
		if len(pods.Items) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d pods of launch %s are still there: %w", len(pods.Items), launchID, ctx.Err())
		case <-t.C:
		}
	}
}

// Logs prints the log of a runner's pod.
func (k *Kubernetes) Logs(ctx context.Context, name string, w io.Writer) error {
	if !rules.ValidName(name) {
		return fmt.Errorf("runner %q is not a valid name", name)
	}
	cs, ns, err := k.client()
	if err != nil {
		return err
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labelRunner + "=" + name})
	if err != nil {
		return fmt.Errorf("find the pod of runner %s: %w", name, err)
	}
	if len(pods.Items) == 0 {
		return fmt.Errorf("no kubernetes runner %s in namespace %s: `drover fleet list` shows the launched runners", name, ns)
	}
	rc, err := cs.CoreV1().Pods(ns).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{Container: "runner"}).Stream(ctx)
	if err != nil {
		return fmt.Errorf("read the log of pod %s: %w", pods.Items[0].Name, err)
	}
	defer rc.Close()
	_, err = io.Copy(w, rc)
	return err
}
