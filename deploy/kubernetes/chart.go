package kubernetes

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// ChartDir is the Helm chart, relative to this package.
const ChartDir = "../helm/strata"

// RenderChart renders the chart in dir for a release named strata in
// namespace, with values merged over the chart's values.yaml (and checked
// against its values.schema.json), the way `helm template` does: the
// manifests in Helm's install order, each as "---\n# Source: <template>".
// A missing value is an error (strict rendering), and so is a template's
// fail (values that cannot work together).
func RenderChart(dir, namespace string, values map[string]any) ([]byte, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, err
	}
	opts := chartutil.ReleaseOptions{Name: "strata", Namespace: namespace, Revision: 1, IsInstall: true}
	vals, err := chartutil.ToRenderValues(ch, values, opts, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	files, err := engine.Engine{Strict: true}.Render(ch, vals)
	if err != nil {
		return nil, err
	}
	hooks, manifests, err := releaseutil.SortManifests(files, chartutil.DefaultVersionSet, releaseutil.InstallOrder)
	if err != nil {
		return nil, err
	}
	if len(hooks) > 0 {
		return nil, fmt.Errorf("the chart has %d hooks; the manifest renders none", len(hooks))
	}
	var b bytes.Buffer
	for _, m := range manifests {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.Name, strings.TrimSpace(m.Content))
	}
	return b.Bytes(), nil
}

// DecodeStrict decodes every object of a rendered manifest into its
// Kubernetes API type, rejecting unknown and duplicate fields: a typo in a
// template (readinessprobe, volumeMount) fails here instead of being
// dropped by the API server. Kinds the chart does not use are errors too.
func DecodeStrict(manifest []byte) ([]any, error) {
	var out []any
	for i, doc := range splitDocuments(manifest) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		var obj any
		switch tm.APIVersion + " " + tm.Kind {
		case "v1 Namespace":
			obj = &corev1.Namespace{}
		case "v1 Secret":
			obj = &corev1.Secret{}
		case "v1 Service":
			obj = &corev1.Service{}
		case "apps/v1 StatefulSet":
			obj = &appsv1.StatefulSet{}
		case "apps/v1 Deployment":
			obj = &appsv1.Deployment{}
		case "policy/v1 PodDisruptionBudget":
			obj = &policyv1.PodDisruptionBudget{}
		default:
			return nil, fmt.Errorf("document %d: unexpected %s %s", i, tm.APIVersion, tm.Kind)
		}
		// The API server's own decoding: case-sensitive field names (plain
		// encoding/json would take readinessprobe for readinessProbe),
		// unknown and duplicate fields reported.
		j, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d (%s): %w", i, tm.Kind, err)
		}
		strict, err := k8sjson.UnmarshalStrict(j, obj)
		if err == nil && len(strict) > 0 {
			err = errors.Join(strict...)
		}
		if err != nil {
			return nil, fmt.Errorf("document %d (%s): %w", i, tm.Kind, err)
		}
		out = append(out, obj)
	}
	return out, nil
}

// splitDocuments splits a multi-document YAML stream, dropping documents
// that hold only comments or whitespace.
func splitDocuments(b []byte) [][]byte {
	var out [][]byte
	for _, doc := range bytes.Split(append([]byte("\n"), b...), []byte("\n---")) {
		empty := true
		for _, line := range strings.Split(string(doc), "\n") {
			if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
				empty = false
				break
			}
		}
		if !empty {
			out = append(out, doc)
		}
	}
	return out
}
