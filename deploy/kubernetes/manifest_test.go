package kubernetes

import (
	"os"
	"strings"
	"testing"
)

func TestManifestIsConsistent(t *testing.T) {
	b, err := os.ReadFile("strata.yaml")
	if err != nil {
		t.Fatal(err)
	}
	checkManifest(t, b)
}

// checkManifest parses a manifest and reports every failed check.
func checkManifest(t *testing.T, manifest []byte) {
	t.Helper()
	objs, err := Parse(manifest)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range Check(objs) {
		t.Error(err)
	}
}

// TestCheckCatchesBrokenManifests proves the checks can fail: each mutation
// of the real manifest must be reported.
func TestCheckCatchesBrokenManifests(t *testing.T) {
	b, err := os.ReadFile("strata.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct{ old, new string }{
		"voters":      {"metad-2=metad-2.metad.strata.svc:9191", "metad-9=metad-9.metad.strata.svc:9191"},
		"readiness":   {"path: /ready", "path: /health"},
		"non-root":    {"runAsNonRoot: true", "runAsNonRoot: false"},
		"client port": {"port: 9000", "port: 9001"},
		"ca key":      {"- {name: ca, mountPath: /ca, readOnly: true}", "- {name: ca-key, mountPath: /ca, readOnly: true}"},
		"min ISR disagrees": {"- name: STRATA_PARTITIOND_MIN_INSYNC_REPLICAS\n              value: \"2\"",
			"- name: STRATA_PARTITIOND_MIN_INSYNC_REPLICAS\n              value: \"1\""},
		"replication factor above partition servers": {"- name: STRATA_METAD_DEFAULT_REPLICATION_FACTOR\n              value: \"3\"",
			"- name: STRATA_METAD_DEFAULT_REPLICATION_FACTOR\n              value: \"4\""},
		"offsets factor unset": {"- name: STRATA_COORDINATORD_OFFSETS_REPLICATION_FACTOR\n              value: \"3\"",
			"- name: STRATA_COORDINATORD_OFFSETS_REPLICATION_FACTOR\n              value: \"\""},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if !strings.Contains(string(b), c.old) {
				t.Fatalf("manifest no longer contains %q", c.old)
			}
			objs, err := Parse([]byte(strings.Replace(string(b), c.old, c.new, 1)))
			if err != nil {
				t.Fatal(err)
			}
			if errs := Check(objs); len(errs) == 0 {
				t.Fatalf("mutation %q not detected", name)
			}
		})
	}
}
