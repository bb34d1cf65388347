// Package kubernetes holds the Kubernetes material of the split deployment
// and its offline checks: the Helm chart (deploy/helm/strata) rendered with
// the Helm library and strict-decoded into the Kubernetes API types, the
// plain manifest strata.yaml (the chart's rendered default, kept equal by a
// test), and Check, the consistency rules both must keep: every role scales
// on its own, probes use the spec's /ready and /live, the metad voter list
// matches its replicas, only init containers see the CA key, and the
// replication settings agree.
package kubernetes

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Object is the part of a Kubernetes object the checks read.
type Object struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name      string `yaml:"name"`
		Namespace string `yaml:"namespace"`
	} `yaml:"metadata"`
	Spec struct {
		Replicas    int    `yaml:"replicas"`
		ServiceName string `yaml:"serviceName"`
		Ports       []struct {
			Name string `yaml:"name"`
			Port int    `yaml:"port"`
		} `yaml:"ports"`
		Template struct {
			Spec PodSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// PodSpec is the part of a pod template the checks read.
type PodSpec struct {
	SecurityContext struct {
		RunAsNonRoot bool `yaml:"runAsNonRoot"`
	} `yaml:"securityContext"`
	InitContainers []Container `yaml:"initContainers"`
	Containers     []Container `yaml:"containers"`
	Volumes        []struct {
		Name   string `yaml:"name"`
		Secret *struct {
			SecretName string `yaml:"secretName"`
			Items      []struct {
				Key string `yaml:"key"`
			} `yaml:"items"`
		} `yaml:"secret"`
	} `yaml:"volumes"`
}

// Container is the part of a container the checks read.
type Container struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Env     []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"env"`
	ReadinessProbe *Probe `yaml:"readinessProbe"`
	LivenessProbe  *Probe `yaml:"livenessProbe"`
	VolumeMounts   []struct {
		Name string `yaml:"name"`
	} `yaml:"volumeMounts"`
}

// Probe is an HTTP probe.
type Probe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
	} `yaml:"httpGet"`
}

// EnvValue returns the value of an environment variable ("" when absent).
func (c Container) EnvValue(name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// Parse reads every object of a multi-document manifest.
func Parse(b []byte) ([]Object, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var out []Object
	for {
		var o Object
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
}

// Roles are the workloads the manifest must hold, one per role.
var Roles = []string{"metad", "partitiond", "coordinatord", "gateway"}

// Check returns every inconsistency found in the manifest's objects.
func Check(objs []Object) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	workloads := map[string]Object{}
	services := map[string]Object{}
	for _, o := range objs {
		switch o.Kind {
		case "StatefulSet", "Deployment":
			workloads[o.Metadata.Name] = o
		case "Service":
			services[o.Metadata.Name] = o
		}
	}
	for _, r := range Roles {
		w, ok := workloads[r]
		if !ok {
			bad("no workload for role %s", r)
			continue
		}
		if _, ok := services[r]; !ok {
			bad("%s: no Service", r)
		}
		if w.Kind == "StatefulSet" && w.Spec.ServiceName != r {
			bad("%s: serviceName %q, want %q (stable per-pod DNS)", r, w.Spec.ServiceName, r)
		}
		pod := w.Spec.Template.Spec
		if !pod.SecurityContext.RunAsNonRoot {
			bad("%s: pods must run as non-root", r)
		}
		if len(pod.Containers) != 1 {
			bad("%s: want one container, have %d", r, len(pod.Containers))
			continue
		}
		c := pod.Containers[0]
		if len(c.Command) == 0 || c.Command[0] != r {
			bad("%s: container command %v must run the %s binary", r, c.Command, r)
		}
		if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/ready" {
			bad("%s: readiness probe must GET /ready", r)
		}
		if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/live" {
			bad("%s: liveness probe must GET /live", r)
		}
		if c.EnvValue("STRATA_NODE_ID") != "$(POD_NAME)" {
			bad("%s: STRATA_NODE_ID must be the pod name (certificate identity)", r)
		}
		// Only the init container that issues the node certificate may
		// mount the volume holding the CA key.
		keyVolumes := map[string]bool{}
		for _, v := range pod.Volumes {
			if v.Secret != nil && (len(v.Secret.Items) == 0 || hasKey(v.Secret.Items, "ca.key")) {
				keyVolumes[v.Name] = true
			}
		}
		for _, m := range c.VolumeMounts {
			if keyVolumes[m.Name] {
				bad("%s: the role container mounts the CA key volume %q", r, m.Name)
			}
		}
		if len(pod.InitContainers) == 0 || !strings.Contains(strings.Join(pod.InitContainers[0].Command, " "), "certs issue") {
			bad("%s: an init container must issue the node certificate", r)
		}
	}
	if m, ok := workloads["metad"]; ok && len(m.Spec.Template.Spec.Containers) == 1 {
		c := m.Spec.Template.Spec.Containers[0]
		voters := strings.Split(c.EnvValue("STRATA_METAD_VOTERS"), ",")
		if len(voters) != m.Spec.Replicas {
			bad("metad: %d voters for %d replicas", len(voters), m.Spec.Replicas)
		}
		for i, v := range voters {
			if !strings.HasPrefix(v, fmt.Sprintf("metad-%d=metad-%d.metad.", i, i)) {
				bad("metad: voter %d is %q, want metad-%d=metad-%d.metad...", i, v, i, i)
			}
		}
		for _, r := range Roles[1:] {
			w, ok := workloads[r]
			if !ok || len(w.Spec.Template.Spec.Containers) != 1 {
				continue
			}
			addrs := strings.Split(w.Spec.Template.Spec.Containers[0].EnvValue("STRATA_METAD_ADDRS"), ",")
			if len(addrs) != m.Spec.Replicas {
				bad("%s: STRATA_METAD_ADDRS lists %d metad, the StatefulSet runs %d", r, len(addrs), m.Spec.Replicas)
			}
		}
	}
	checkReplication(workloads, bad)
	if g, ok := services["gateway"]; ok {
		found := false
		for _, p := range g.Spec.Ports {
			found = found || p.Port == 9000
		}
		if !found {
			bad("gateway Service must expose the Wire v2 client port 9000")
		}
	}
	return errs
}

// checkReplication checks the replication settings (docs/replication.md):
// metad's default replication factor and min ISR are set and satisfiable
// by the partition servers, every partitiond enforces the min ISR metad
// reports, and coordinatord's __consumer_offsets factor fits too.
func checkReplication(workloads map[string]Object, bad func(string, ...any)) {
	env := func(role, name string) (int, bool) {
		w, ok := workloads[role]
		if !ok || len(w.Spec.Template.Spec.Containers) != 1 {
			return 0, false
		}
		v := w.Spec.Template.Spec.Containers[0].EnvValue(name)
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			bad("%s: %s %q is not a positive integer", role, name, v)
			return 0, false
		}
		return n, true
	}
	partitionServers := workloads["partitiond"].Spec.Replicas
	rf, okRF := env("metad", "STRATA_METAD_DEFAULT_REPLICATION_FACTOR")
	minISR, okISR := env("metad", "STRATA_METAD_MIN_INSYNC_REPLICAS")
	if okRF && rf > partitionServers {
		bad("metad: default replication factor %d exceeds the %d partitiond replicas", rf, partitionServers)
	}
	if okRF && okISR && minISR > rf {
		bad("metad: min ISR %d exceeds the replication factor %d", minISR, rf)
	}
	if pISR, ok := env("partitiond", "STRATA_PARTITIOND_MIN_INSYNC_REPLICAS"); ok && okISR && pISR != minISR {
		bad("partitiond: STRATA_PARTITIOND_MIN_INSYNC_REPLICAS %d differs from metad's min ISR %d", pISR, minISR)
	}
	if orf, ok := env("coordinatord", "STRATA_COORDINATORD_OFFSETS_REPLICATION_FACTOR"); ok && orf > partitionServers {
		bad("coordinatord: __consumer_offsets replication factor %d exceeds the %d partitiond replicas", orf, partitionServers)
	}
}

func hasKey(items []struct {
	Key string `yaml:"key"`
}, key string) bool {
	for _, it := range items {
		if it.Key == key {
			return true
		}
	}
	return false
}
