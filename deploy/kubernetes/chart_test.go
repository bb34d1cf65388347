package kubernetes

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

var update = flag.Bool("update", false, "rewrite strata.yaml from the chart's defaults")

// manifestHeader opens strata.yaml; the rest is the chart's rendering.
const manifestHeader = `# Strata on Kubernetes: each role scales on its own.
#
# GENERATED from the Helm chart deploy/helm/strata with its default values,
# namespace strata and createNamespace=true; do not edit, change the chart
# and run
#   go test github.com/strataio/strata/deploy/kubernetes -run TestManifestIsChartDefault -update
# (helm template strata deploy/helm/strata -n strata --set createNamespace=true
# prints the same objects). With Helm, install the chart instead.
#
#   strata certs init --dir ./strata-ca
#   kubectl apply -f deploy/kubernetes/strata.yaml          # namespace first
#   kubectl -n strata create secret generic strata-ca \
#     --from-file=ca.crt=strata-ca/ca.crt --from-file=ca.key=strata-ca/ca.key
#   kubectl apply -f deploy/kubernetes/strata.yaml
#
# Every pod issues its own node certificate at start (init container
# ` + "`strata certs issue`" + `, identity spiffe://strata/<role>/<pod name>) from the
# CA secret; only the init container sees the CA key. Clients connect to the
# ` + "`gateway`" + ` Service on 9000. The image is the FROM scratch image of
# ` + "`make image`" + ` (strata:dev): load it into your cluster's nodes or push it to
# your registry and change image.repository/tag. See docs/deployment.md.
`

func render(t *testing.T, values map[string]any) []byte {
	t.Helper()
	out, err := RenderChart(ChartDir, "strata", values)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestManifestIsChartDefault: strata.yaml is the chart rendered with its
// defaults (plus the Namespace object); -update rewrites it.
func TestManifestIsChartDefault(t *testing.T) {
	want := append([]byte(manifestHeader), render(t, map[string]any{"createNamespace": true})...)
	if *update {
		if err := os.WriteFile("strata.yaml", want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile("strata.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < min(len(gl), len(wl)); i++ {
			if gl[i] != wl[i] {
				t.Fatalf("strata.yaml differs from the chart's rendering at line %d:\n  file:     %s\n  rendered: %s\nrerun with -update", i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("strata.yaml differs from the chart's rendering in length (%d vs %d lines); rerun with -update", len(gl), len(wl))
	}
}

// chartCases are value sets the chart must render into a valid,
// consistent deployment.
var chartCases = map[string]map[string]any{
	"defaults": nil,
	"five metad, larger cluster, storage classes": {
		"metad":      map[string]any{"replicas": 5, "storage": map[string]any{"size": "2Gi", "storageClassName": "fast-ssd"}},
		"partitiond": map[string]any{"replicas": 6, "storage": map[string]any{"size": "500Gi", "storageClassName": "local-nvme"}},
		"gateway":    map[string]any{"replicas": 4, "service": map[string]any{"type": "LoadBalancer", "annotations": map[string]any{"example.com/lb": "internal"}}, "advertisedAddress": "strata.example.com:9000"},
	},
	"single partition server": {
		"replication": map[string]any{"factor": 1, "minInSyncReplicas": 1, "offsetsFactor": 1},
		"metad":       map[string]any{"replicas": 1},
		"partitiond":  map[string]any{"replicas": 1},
	},
	"ca from values, resources, scheduling": {
		"tls": map[string]any{"create": true, "caSecret": "my-ca", "caCrt": "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n", "caKey": "-----BEGIN EC PRIVATE KEY-----\ny\n-----END EC PRIVATE KEY-----\n"},
		"partitiond": map[string]any{
			"resources":    map[string]any{"requests": map[string]any{"cpu": "2", "memory": "4Gi"}, "limits": map[string]any{"memory": "8Gi"}},
			"nodeSelector": map[string]any{"disk": "nvme"},
			"tolerations":  []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "strata", "effect": "NoSchedule"}},
			"extraEnv":     []any{map[string]any{"name": "STRATA_PARTITIOND_RETENTION_CHECK_INTERVAL", "value": "1m"}},
		},
		"imagePullSecrets": []any{map[string]any{"name": "regcred"}},
		"image":            map[string]any{"repository": "registry.example.com/strata", "tag": "1.2.3", "pullPolicy": "Always"},
		"metrics":          map[string]any{"enabled": false},
		"logFormat":        "text",
	},
}

// TestChartRendersStrictly renders each value set, strict-decodes every
// object into its Kubernetes type and runs the manifest checks on it.
func TestChartRendersStrictly(t *testing.T) {
	for name, values := range chartCases {
		t.Run(name, func(t *testing.T) {
			out := render(t, values)
			objs, err := DecodeStrict(out)
			if err != nil {
				t.Fatal(err)
			}
			if len(objs) < 12 {
				t.Fatalf("%d objects, want at least 12 (4 roles x Service, workload, PDB)", len(objs))
			}
			checkManifest(t, out)
		})
	}
}

// TestChartValuesReachTheObjects follows each kind of value into the
// decoded objects.
func TestChartValuesReachTheObjects(t *testing.T) {
	objs, err := DecodeStrict(render(t, chartCases["five metad, larger cluster, storage classes"]))
	if err != nil {
		t.Fatal(err)
	}
	sts := statefulSets(objs)
	if r := *sts["metad"].Spec.Replicas; r != 5 {
		t.Errorf("metad replicas %d", r)
	}
	if c := sts["partitiond"].Spec.VolumeClaimTemplates[0].Spec; *c.StorageClassName != "local-nvme" || c.Resources.Requests.Storage().String() != "500Gi" {
		t.Errorf("partitiond claim %+v", c)
	}
	if c := sts["metad"].Spec.VolumeClaimTemplates[0].Spec; *c.StorageClassName != "fast-ssd" {
		t.Errorf("metad claim %+v", c)
	}
	gw := deployment(objs, "gateway")
	if env := envOf(gw.Spec.Template.Spec.Containers[0]); env["STRATA_GATEWAY_CLIENT_ADVERTISE"] != "strata.example.com:9000" {
		t.Errorf("gateway advertise %q", env["STRATA_GATEWAY_CLIENT_ADVERTISE"])
	}
	if svc := service(objs, "gateway"); svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Annotations["example.com/lb"] != "internal" {
		t.Errorf("gateway service %+v", svc.Spec.Type)
	}

	objs, err = DecodeStrict(render(t, chartCases["ca from values, resources, scheduling"]))
	if err != nil {
		t.Fatal(err)
	}
	var secret *corev1.Secret
	for _, o := range objs {
		if s, ok := o.(*corev1.Secret); ok {
			secret = s
		}
	}
	if secret == nil || secret.Name != "my-ca" || !strings.Contains(string(secret.Data["ca.key"]), "PRIVATE KEY") {
		t.Fatalf("CA secret %+v", secret)
	}
	pd := statefulSets(objs)["partitiond"].Spec.Template.Spec
	c := pd.Containers[0]
	if c.Resources.Limits.Memory().String() != "8Gi" || c.Resources.Requests.Cpu().String() != "2" {
		t.Errorf("partitiond resources %+v", c.Resources)
	}
	if pd.NodeSelector["disk"] != "nvme" || len(pd.Tolerations) != 1 || pd.ImagePullSecrets[0].Name != "regcred" {
		t.Errorf("partitiond scheduling %+v %+v %+v", pd.NodeSelector, pd.Tolerations, pd.ImagePullSecrets)
	}
	env := envOf(c)
	if env["STRATA_PARTITIOND_RETENTION_CHECK_INTERVAL"] != "1m" || env["ENABLE_EXPORTER"] != "false" || env["STRATA_LOG_FORMAT"] != "text" {
		t.Errorf("partitiond env %v", env)
	}
	if c.Image != "registry.example.com/strata:1.2.3" || c.ImagePullPolicy != corev1.PullAlways || pd.InitContainers[0].Image != c.Image {
		t.Errorf("image %s %s", c.Image, c.ImagePullPolicy)
	}
	for _, v := range pd.Volumes {
		if v.Secret != nil && v.Secret.SecretName != "my-ca" {
			t.Errorf("volume %s uses secret %s", v.Name, v.Secret.SecretName)
		}
	}
	for _, p := range c.Ports {
		if p.Name == "metrics" {
			t.Error("metrics port exposed with metrics.enabled false")
		}
	}
}

// TestManifestKeepsReplicatedDefaults: the defaults are the replicated
// deployment of docs/replication.md (metad RF 3 and min ISR 2, min ISR 2 on
// every partitiond, __consumer_offsets RF 3), on 3 metad and 3 partitiond.
func TestManifestKeepsReplicatedDefaults(t *testing.T) {
	b, err := os.ReadFile("strata.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := DecodeStrict(b)
	if err != nil {
		t.Fatal(err)
	}
	sts := statefulSets(objs)
	want := map[string]map[string]string{
		"metad":        {"STRATA_METAD_DEFAULT_REPLICATION_FACTOR": "3", "STRATA_METAD_MIN_INSYNC_REPLICAS": "2"},
		"partitiond":   {"STRATA_PARTITIOND_MIN_INSYNC_REPLICAS": "2"},
		"coordinatord": {"STRATA_COORDINATORD_OFFSETS_REPLICATION_FACTOR": "3"},
	}
	for role, vars := range want {
		env := envOf(sts[role].Spec.Template.Spec.Containers[0])
		for k, v := range vars {
			if env[k] != v {
				t.Errorf("%s: %s=%q, want %s", role, k, env[k], v)
			}
		}
	}
	if *sts["metad"].Spec.Replicas != 3 || *sts["partitiond"].Spec.Replicas != 3 {
		t.Errorf("metad %d, partitiond %d replicas; want 3 and 3", *sts["metad"].Spec.Replicas, *sts["partitiond"].Spec.Replicas)
	}
}

// TestChartRejectsBadValues: values that cannot work fail the render, by
// the schema (types, unknown keys) or by the chart's own checks.
func TestChartRejectsBadValues(t *testing.T) {
	for name, c := range map[string]struct {
		values map[string]any
		want   string
	}{
		"factor above partition servers": {map[string]any{"partitiond": map[string]any{"replicas": 2}}, "replication.factor 3 exceeds partitiond.replicas 2"},
		"offsets factor":                 {map[string]any{"replication": map[string]any{"factor": 1, "minInSyncReplicas": 1, "offsetsFactor": 4}}, "offsetsFactor 4 exceeds"},
		"min ISR above factor":           {map[string]any{"replication": map[string]any{"factor": 2, "minInSyncReplicas": 3, "offsetsFactor": 3}}, "minInSyncReplicas 3 exceeds replication.factor 2"},
		"even metad":                     {map[string]any{"metad": map[string]any{"replicas": 4}}, "metad.replicas 4 is even"},
		"CA without key":                 {map[string]any{"tls": map[string]any{"create": true, "caCrt": "x"}}, "tls.create needs"},
		"unknown key":                    {map[string]any{"gateway": map[string]any{"replicaCount": 3}}, "replicaCount"},
		"wrong type":                     {map[string]any{"partitiond": map[string]any{"replicas": "three"}}, "replicas"},
		"bad storage size":               {map[string]any{"metad": map[string]any{"storage": map[string]any{"size": "lots"}}}, "size"},
		"bad service type":               {map[string]any{"gateway": map[string]any{"service": map[string]any{"type": "Ingress"}}}, "type"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := RenderChart(ChartDir, "strata", c.values)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want an error containing %q, got %v", c.want, err)
			}
		})
	}
}

// TestDecodeStrictRejectsTypos: a misspelt field is an error, not dropped.
func TestDecodeStrictRejectsTypos(t *testing.T) {
	b, err := os.ReadFile("strata.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ old, new string }{
		{"readinessProbe:", "readinessprobe:"},
		{"publishNotReadyAddresses: true", "publishNotReadyAddress: true"},
		{"kind: PodDisruptionBudget", "kind: PodDisruptionBudgets"},
		{"replicas: 3", "replicas: three"},
	} {
		if !bytes.Contains(b, []byte(c.old)) {
			t.Fatalf("manifest no longer contains %q", c.old)
		}
		if _, err := DecodeStrict(bytes.Replace(b, []byte(c.old), []byte(c.new), 1)); err == nil {
			t.Errorf("%q accepted", c.new)
		}
	}
}

func statefulSets(objs []any) map[string]*appsv1.StatefulSet {
	out := map[string]*appsv1.StatefulSet{}
	for _, o := range objs {
		if s, ok := o.(*appsv1.StatefulSet); ok {
			out[s.Name] = s
		}
	}
	return out
}

func deployment(objs []any, name string) *appsv1.Deployment {
	for _, o := range objs {
		if d, ok := o.(*appsv1.Deployment); ok && d.Name == name {
			return d
		}
	}
	return nil
}

func service(objs []any, name string) *corev1.Service {
	for _, o := range objs {
		if s, ok := o.(*corev1.Service); ok && s.Name == name {
			return s
		}
	}
	return nil
}

func envOf(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		out[e.Name] = e.Value
	}
	return out
}

// TestChartLints runs Helm's chart linter (`helm lint --strict`): any
// warning or error fails; the one info (no icon) does not.
func TestChartLints(t *testing.T) {
	l := lint.All(ChartDir, nil, "strata", false)
	for _, m := range l.Messages {
		if m.Severity > support.InfoSev {
			t.Error(m)
		}
	}
}
