package config

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type sub struct {
	Addr    string        `yaml:"addr" help:"listen address"`
	Timeout time.Duration `yaml:"timeout"`
}

type testConfig struct {
	DataDir string   `yaml:"data_dir" help:"data directory"`
	Port    int      `yaml:"health_check_port" env:"HEALTH_CHECK_PORT"`
	Enable  bool     `yaml:"enable_exporter" env:"ENABLE_EXPORTER"`
	Token   string   `yaml:"token" secret:"true"`
	Peers   []string `yaml:"peers"`
	Gateway sub      `yaml:"gateway"`
}

func defaults() *testConfig {
	return &testConfig{DataDir: "./data", Port: 9080, Gateway: sub{Addr: ":9000", Timeout: time.Second}}
}

func load(t *testing.T, yamlText string, env map[string]string, args ...string) (*testConfig, error) {
	t.Helper()
	cfg := defaults()
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l.Lookup = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	l.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	path := ""
	if yamlText != "" {
		path = filepath.Join(t.TempDir(), "c.yaml")
		os.WriteFile(path, []byte(yamlText), 0o600)
	}
	return cfg, l.Load(path)
}

func TestPrecedenceFlagsOverEnvOverFileOverDefaults(t *testing.T) {
	cfg, err := load(t, "data_dir: /file\nhealth_check_port: 1\ngateway:\n  addr: file:1\n  timeout: 3s\n",
		map[string]string{"STRATA_DATA_DIR": "/env", "HEALTH_CHECK_PORT": "2", "STRATA_PEERS": "a, b"},
		"--data-dir", "/flag")
	if err != nil {
		t.Fatal(err)
	}
	want := &testConfig{DataDir: "/flag", Port: 2, Peers: []string{"a", "b"}, Gateway: sub{Addr: "file:1", Timeout: 3 * time.Second}}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Fatal(diff)
	}
}

func TestGeneratedEnvBeatsAlias(t *testing.T) {
	cfg, err := load(t, "", map[string]string{"STRATA_HEALTH_CHECK_PORT": "5", "HEALTH_CHECK_PORT": "6", "ENABLE_EXPORTER": "true"})
	if err != nil || cfg.Port != 5 || !cfg.Enable {
		t.Fatalf("cfg=%+v err=%v", cfg, err)
	}
}

func TestUnknownYAMLKeyFails(t *testing.T) {
	if _, err := load(t, "data_dir: x\nbogus: 1\n", nil); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Fatalf("want unknown key error, got %v", err)
	}
}

func TestBadValuesAreReported(t *testing.T) {
	_, err := load(t, "", map[string]string{"HEALTH_CHECK_PORT": "abc"}, "--gateway.timeout", "soon")
	if err == nil || !strings.Contains(err.Error(), "HEALTH_CHECK_PORT") || !strings.Contains(err.Error(), "gateway.timeout") {
		t.Fatalf("want both errors, got %v", err)
	}
}

func TestEmptyFileIsNoSettings(t *testing.T) {
	cfg, err := load(t, "\n", nil)
	if err != nil || cfg.DataDir != "./data" {
		t.Fatalf("cfg=%+v err=%v", cfg, err)
	}
}

func TestEffectiveRedactsSecrets(t *testing.T) {
	cfg := defaults()
	cfg.Token = "hunter2"
	l, _ := New(cfg)
	eff := strings.Join(l.Effective(), "\n")
	if strings.Contains(eff, "hunter2") || !strings.Contains(eff, "token=<redacted>") {
		t.Fatalf("secret leaked or missing: %s", eff)
	}
}

// An inline embedded struct (a role binary's node.Common) contributes its
// fields at the parent's level in YAML, environment and flags.
func TestInlineStructFlattensPaths(t *testing.T) {
	type Inner = sub
	type inlineCfg struct {
		Inner `yaml:",inline"`
		Role  string `yaml:"role"`
	}
	cfg := &inlineCfg{Inner: Inner{Addr: ":1"}}
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l.Lookup = func(k string) (string, bool) {
		if k == "STRATA_TIMEOUT" {
			return "3s", true
		}
		return "", false
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	l.RegisterFlags(fs)
	if err := fs.Parse([]string{"--addr", ":2"}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("addr: \":3\"\nrole: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := l.Load(path); err != nil {
		t.Fatal(err)
	}
	if cfg.Addr != ":2" || cfg.Timeout != 3*time.Second || cfg.Role != "x" {
		t.Fatalf("got %+v", cfg)
	}
}
