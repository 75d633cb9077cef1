package deploy

import (
	"bufio"
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// binary is bucketlog built by the Dockerfile's own build line (TestMain).
var binary string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "bucketlog-deploy-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "bucketlog")
	if out, err := dockerfileBuild(binary); err != nil {
		fmt.Fprintf(os.Stderr, "the Dockerfile's build line: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// dockerBuildLine is the Dockerfile's `RUN CGO_ENABLED=0 go build ...` line.
func dockerBuildLine() (string, error) {
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		return "", err
	}
	var found []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "RUN ") && strings.Contains(line, "go build") {
			found = append(found, strings.TrimSpace(strings.TrimPrefix(line, "RUN ")))
		}
	}
	if len(found) != 1 {
		return "", fmt.Errorf("want exactly one RUN ... go build line in the Dockerfile, found %q", found)
	}
	return found[0], nil
}

// dockerfileBuild runs the Dockerfile's build line from the repository
// root (the build stage's /src), writing the binary to out instead of the
// image's /out/bucketlog.
func dockerfileBuild(out string) ([]byte, error) {
	line, err := dockerBuildLine()
	if err != nil {
		return nil, err
	}
	const imageOut = "-o /out/bucketlog"
	if !strings.Contains(line, imageOut) || !strings.HasPrefix(line, "CGO_ENABLED=0 go build") {
		return nil, fmt.Errorf("the build line %q must start with CGO_ENABLED=0 go build and write %s", line, imageOut)
	}
	line = strings.Replace(line, imageOut, "-o "+strconv.Quote(out), 1)
	cmd := exec.Command("sh", "-c", line)
	cmd.Dir = ".."
	return cmd.CombinedOutput()
}

// TestDockerfileBuildIsStatic: the binary the Dockerfile builds has no
// program interpreter and needs no shared library, and links no emulator.
func TestDockerfileBuildIsStatic(t *testing.T) {
	f, err := elf.Open(binary)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the binary has a program interpreter (PT_INTERP): it is not static")
		}
		if p.Type == elf.PT_DYNAMIC {
			t.Errorf("the binary has a dynamic section (PT_DYNAMIC)")
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	if len(libs) > 0 {
		t.Errorf("the binary needs shared libraries (DT_NEEDED): %v", libs)
	}
	bi, err := buildinfo.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range bi.Settings {
		if s.Key == "CGO_ENABLED" && s.Value != "0" {
			t.Errorf("built with CGO_ENABLED=%s", s.Value)
		}
	}
	for _, d := range bi.Deps {
		if strings.Contains(d.Path, "gofakes3") || strings.Contains(d.Path, "fake-gcs-server") {
			t.Errorf("the image's binary links the emulator module %s", d.Path)
		}
	}
	// And it runs.
	out, err := exec.Command(binary, "version").Output()
	if err != nil || !strings.Contains(string(out), `"action":"version"`) {
		t.Fatalf("bucketlog version: %v %s", err, out)
	}
}

// TestDockerfile: multi-stage, non-root, the binary as entrypoint.
func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	if n := strings.Count(s, "\nFROM "); n < 2 {
		t.Errorf("want a multi-stage build, found %d FROM lines", n)
	}
	if !strings.Contains(s, "\nUSER 65532:65532\n") {
		t.Errorf("the image does not run as the non-root user 65532")
	}
	if !strings.Contains(s, `ENTRYPOINT ["/usr/local/bin/bucketlog"]`) || !strings.Contains(s, "EXPOSE 7480") {
		t.Errorf("entrypoint or port missing")
	}
}

// manifests decodes every manifest under kubernetes/ strictly into its
// Kubernetes API type: an unknown or misspelt field fails.
func manifests(t *testing.T) map[string]any {
	t.Helper()
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	out := map[string]any{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range strings.Split(string(data), "\n---\n") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
				t.Fatalf("%s document %d: %v", file, i, err)
			}
			var obj any
			switch tm.APIVersion + "/" + tm.Kind {
			case "apps/v1/StatefulSet":
				obj = &appsv1.StatefulSet{}
			case "v1/Service":
				obj = &corev1.Service{}
			case "v1/ServiceAccount":
				obj = &corev1.ServiceAccount{}
			case "v1/Namespace":
				obj = &corev1.Namespace{}
			case "policy/v1/PodDisruptionBudget":
				obj = &policyv1.PodDisruptionBudget{}
			default:
				t.Fatalf("%s document %d: unexpected %s %s", file, i, tm.APIVersion, tm.Kind)
			}
			if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
				t.Fatalf("%s document %d (%s): %v", file, i, tm.Kind, err)
			}
			if _, dup := out[tm.Kind]; dup {
				t.Fatalf("two %s manifests", tm.Kind)
			}
			out[tm.Kind] = obj
		}
	}
	return out
}

// TestStrictDecodingRefusesUnknownFields: the decoding the manifest test
// relies on fails on a misspelt field.
func TestStrictDecodingRefusesUnknownFields(t *testing.T) {
	bad := "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: x\nspec:\n  maxUnavailabel: 1\n"
	if err := yaml.UnmarshalStrict([]byte(bad), &policyv1.PodDisruptionBudget{}); err == nil {
		t.Fatal("a misspelt field was accepted")
	}
}

// flagValues reads --name=value and --name value arguments.
func flagValues(args []string) map[string]string {
	out := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, val, ok := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !ok && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			val = args[i+1]
			i++
		}
		out[name] = val
	}
	return out
}

// TestManifestsAgreeWithTheBinary: the values the binary and the manifests
// must share — the serve flags (the binary accepts every one), the port,
// the probe paths, the environment (the binary reads the pod's shard pair
// and bucket from it, with no warning), replicas = NOETL_SHARD_COUNT, the
// pod-index label through the downward API, and a grace period longer than
// the shutdown bound.
func TestManifestsAgreeWithTheBinary(t *testing.T) {
	m := manifests(t)
	for _, kind := range []string{"StatefulSet", "Service", "ServiceAccount", "PodDisruptionBudget", "Namespace"} {
		if m[kind] == nil {
			t.Fatalf("no %s manifest", kind)
		}
	}
	sts := m["StatefulSet"].(*appsv1.StatefulSet)
	svc := m["Service"].(*corev1.Service)
	sa := m["ServiceAccount"].(*corev1.ServiceAccount)
	pdb := m["PodDisruptionBudget"].(*policyv1.PodDisruptionBudget)
	pod := sts.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(pod.Containers))
	}
	c := pod.Containers[0]

	// The serve flags: the binary accepts them all (an unknown flag or a
	// bad value fails before --help is reached).
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Fatalf("the container does not run serve: %q", c.Args)
	}
	help := exec.Command(binary, append(slices.Clone(c.Args), "--help")...)
	help.Env = []string{}
	if out, err := help.CombinedOutput(); err != nil {
		t.Fatalf("bucketlog %s --help: %v\n%s", strings.Join(c.Args, " "), err, out)
	} else {
		for _, path := range []string{"/healthz", "/readyz"} {
			if !strings.Contains(string(out), "GET    "+path) {
				t.Errorf("serve's help does not list %s", path)
			}
		}
	}
	flags := flagValues(c.Args[1:])

	// The port.
	_, port, err := net.SplitHostPort(flags["listen"])
	if err != nil {
		t.Fatalf("--listen %q: %v", flags["listen"], err)
	}
	if host, _, _ := net.SplitHostPort(flags["listen"]); host != "0.0.0.0" && host != "" {
		t.Errorf("--listen %q: a pod must listen on every interface", flags["listen"])
	}
	if len(c.Ports) != 1 || strconv.Itoa(int(c.Ports[0].ContainerPort)) != port || c.Ports[0].Name != "http" {
		t.Errorf("container ports %+v disagree with --listen %s", c.Ports, flags["listen"])
	}
	if len(svc.Spec.Ports) != 1 || strconv.Itoa(int(svc.Spec.Ports[0].Port)) != port || svc.Spec.Ports[0].TargetPort.String() != "http" {
		t.Errorf("service ports %+v disagree with --listen %s", svc.Spec.Ports, flags["listen"])
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || sts.Spec.ServiceName != svc.Name {
		t.Errorf("the StatefulSet's service must be headless and named by serviceName")
	}

	// The probes.
	probe := func(what string, p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("no %s HTTP probe", what)
			return
		}
		if p.HTTPGet.Path != path || (p.HTTPGet.Port.String() != "http" && p.HTTPGet.Port.String() != port) {
			t.Errorf("%s probe %s on port %s, want %s on %s", what, p.HTTPGet.Path, p.HTTPGet.Port.String(), path, port)
		}
	}
	probe("liveness", c.LivenessProbe, "/healthz")
	probe("readiness", c.ReadinessProbe, "/readyz")

	// The environment: the shard index from the pod-index label, the
	// count equal to replicas, and the binary reading them as meant.
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	idx, ok := env["NOETL_SHARD_INDEX"]
	if !ok || idx.ValueFrom == nil || idx.ValueFrom.FieldRef == nil || idx.ValueFrom.FieldRef.FieldPath != "metadata.labels['apps.kubernetes.io/pod-index']" {
		t.Errorf("NOETL_SHARD_INDEX is not the pod-index label through the downward API: %+v", idx)
	}
	count, err := strconv.Atoi(env["NOETL_SHARD_COUNT"].Value)
	if err != nil || sts.Spec.Replicas == nil || int(*sts.Spec.Replicas) != count {
		t.Errorf("replicas %v must equal NOETL_SHARD_COUNT %q", sts.Spec.Replicas, env["NOETL_SHARD_COUNT"].Value)
	}
	procEnv := []string{}
	for _, e := range c.Env {
		v := e.Value
		if e.Name == "NOETL_SHARD_INDEX" {
			v = strconv.Itoa(count - 1) // the last pod's ordinal
		} else if e.ValueFrom != nil {
			t.Errorf("%s: only NOETL_SHARD_INDEX comes from the downward API here", e.Name)
		}
		procEnv = append(procEnv, e.Name+"="+v)
	}
	check := exec.Command(binary, "selfcheck", "config", "--dir", t.TempDir())
	check.Env = procEnv
	out, err := check.Output()
	if err != nil {
		t.Fatalf("selfcheck config with the pod's environment: %v\n%s", err, out)
	}
	var cfg struct {
		ShardIndex       int      `json:"shard_index"`
		ShardCount       int      `json:"shard_count"`
		BucketConfigured bool     `json:"bucket_configured"`
		Warnings         []string `json:"warnings"`
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatalf("selfcheck config: %v\n%s", err, out)
	}
	if cfg.ShardIndex != count-1 || cfg.ShardCount != count || !cfg.BucketConfigured || len(cfg.Warnings) != 0 {
		t.Errorf("the binary reads the pod's environment as %+v, want shard %d of %d with a bucket and no warning", cfg, count-1, count)
	}

	// The grace period outlasts the shutdown: requests in flight, then
	// the final shipment, with a margin.
	var bound time.Duration
	for _, name := range []string{"shutdown-timeout", "shutdown-ship-timeout"} {
		d, err := time.ParseDuration(flags[name])
		if err != nil {
			t.Fatalf("--%s must be given explicitly in the manifest (the grace period is checked against it): %v", name, err)
		}
		bound += d
	}
	const margin = 5 * time.Second
	if g := pod.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second < bound+margin {
		t.Errorf("terminationGracePeriodSeconds (%v) is not above the shutdown bound %v + %v", fmtPtr(g), bound, margin)
	}

	// One PVC per pod, mounted at --dir; non-root; the identity.
	if len(sts.Spec.VolumeClaimTemplates) != 1 || !slices.Contains(sts.Spec.VolumeClaimTemplates[0].Spec.AccessModes, corev1.ReadWriteOnce) {
		t.Errorf("want one ReadWriteOnce volume claim template")
	} else if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].Name != sts.Spec.VolumeClaimTemplates[0].Name || c.VolumeMounts[0].MountPath != flags["dir"] {
		t.Errorf("the PVC is not mounted at --dir %s: %+v", flags["dir"], c.VolumeMounts)
	}
	if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 65532 {
		t.Errorf("the pod must run as the image's non-root user 65532")
	}
	if pod.ServiceAccountName != sa.Name {
		t.Errorf("the pods run as %q, not the ServiceAccount %q", pod.ServiceAccountName, sa.Name)
	}
	for _, a := range []string{"eks.amazonaws.com/role-arn", "iam.gke.io/gcp-service-account"} {
		if sa.Annotations[a] == "" {
			t.Errorf("the ServiceAccount lacks the workload identity annotation %s", a)
		}
	}
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("the PodDisruptionBudget must allow at most one shard down")
	}
	for what, sel := range map[string]map[string]string{"PodDisruptionBudget": pdb.Spec.Selector.MatchLabels, "Service": svc.Spec.Selector} {
		for k, v := range sel {
			if sts.Spec.Template.Labels[k] != v {
				t.Errorf("the %s selects %s=%s, which the pods do not carry", what, k, v)
			}
		}
	}
}

// TestIAMPolicies: the S3 policy and the GCS role grant exactly what the
// code does to a bucket — get (and head), put (conditional writes
// included), delete, list — and nothing more.
func TestIAMPolicies(t *testing.T) {
	data, err := os.ReadFile("iam/s3-policy.json")
	if err != nil {
		t.Fatal(err)
	}
	var pol struct {
		Version   string
		Statement []struct {
			Sid      string
			Effect   string
			Action   []string
			Resource string
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&pol); err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, s := range pol.Statement {
		if s.Effect != "Allow" || s.Resource == "*" {
			t.Errorf("statement %+v: want Allow on the bucket only", s)
		}
		actions = append(actions, s.Action...)
	}
	slices.Sort(actions)
	if want := []string{"s3:DeleteObject", "s3:GetObject", "s3:ListBucket", "s3:PutObject"}; !slices.Equal(actions, want) {
		t.Errorf("S3 actions %v, want exactly %v", actions, want)
	}
	data, err = os.ReadFile("iam/gcs-role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var role struct {
		Title               string   `json:"title"`
		Description         string   `json:"description"`
		Stage               string   `json:"stage"`
		IncludedPermissions []string `json:"includedPermissions"`
	}
	if err := yaml.UnmarshalStrict(data, &role); err != nil {
		t.Fatal(err)
	}
	perms := slices.Sorted(slices.Values(role.IncludedPermissions))
	if want := []string{"storage.objects.create", "storage.objects.delete", "storage.objects.get", "storage.objects.list"}; !slices.Equal(perms, want) {
		t.Errorf("GCS permissions %v, want exactly %v", perms, want)
	}
}

func fmtPtr(p *int64) string {
	if p == nil {
		return "unset"
	}
	return strconv.FormatInt(*p, 10) + "s"
}
