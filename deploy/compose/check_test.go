package compose

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"go.yaml.in/yaml/v3"
)

const stackFile = "docker-compose.yml"

func load(t *testing.T) *types.Project {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := Load(ctx, stackFile, map[string]string{})
	if err != nil {
		t.Fatalf("load %s: %v", stackFile, err)
	}
	return p
}

func TestStackPassesEveryRule(t *testing.T) {
	p := load(t)
	if errs := Check(p); len(errs) > 0 {
		t.Fatalf("%s breaks %d rules:\n  %s", stackFile, len(errs), strings.Join(errs, "\n  "))
	}
	// The optional services are loaded (profiles enabled) and checked too.
	for _, name := range []string{"prometheus", "grafana", "otel-collector"} {
		s, ok := p.Services[name]
		if !ok || !slices.Contains(s.Profiles, "observability") {
			t.Fatalf("%s missing or not in the observability profile", name)
		}
	}
}

func TestStackPublishesGatewayPortsOnLoopback(t *testing.T) {
	p := load(t)
	want := map[string][]string{
		"gateway-1": {"127.0.0.1:9000->9000", "127.0.0.1:9080->9080", "127.0.0.1:9100->9100"},
		"gateway-2": {"127.0.0.1:9001->9000", "127.0.0.1:9081->9080", "127.0.0.1:9101->9100"},
	}
	for name, s := range p.Services {
		if len(s.Profiles) > 0 {
			continue
		}
		var got []string
		for _, port := range s.Ports {
			got = append(got, port.HostIP+":"+port.Published+"->"+itoa(port.Target))
		}
		slices.Sort(got)
		if !slices.Equal(got, want[name]) {
			t.Errorf("%s publishes %v, want %v", name, got, want[name])
		}
	}
}

// The host ports are overridable (the compose test picks a free block).
func TestStackPortsFollowEnvironment(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := Load(ctx, stackFile, map[string]string{"STRATA_GATEWAY1_CLIENT_PORT": "39000"})
	if err != nil {
		t.Fatal(err)
	}
	gw := p.Services["gateway-1"]
	if gw.Ports[0].Published != "39000" || *gw.Environment["STRATA_GATEWAY_CLIENT_ADVERTISE"] != "127.0.0.1:39000" {
		t.Fatalf("override not applied: %+v %s", gw.Ports[0], *gw.Environment["STRATA_GATEWAY_CLIENT_ADVERTISE"])
	}
}

func TestStackStartOrder(t *testing.T) {
	p := load(t)
	deps := func(name string) []string {
		var out []string
		for d := range p.Services[name].DependsOn {
			out = append(out, d)
		}
		slices.Sort(out)
		return out
	}
	if got := deps("metad-1"); !slices.Equal(got, []string{"certs"}) {
		t.Errorf("metad-1 waits for %v", got)
	}
	if got := deps("gateway-2"); len(got) != 9 {
		t.Errorf("gateway-2 waits for %v, want certs + 3 metad + 3 partitiond + 2 coordinatord", got)
	}
	certs := p.Services["certs"]
	if !oneShot(certs) || certs.Command[2] != "ensure" {
		t.Errorf("certs one-shot command %q", []string(certs.Command))
	}
}

// Each case breaks one rule in a loaded copy of the stack; Check must name it.
func TestCheckCatchesBrokenStacks(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(p *types.Project)
		want   string
	}{
		{"client auth off", func(p *types.Project) {
			setService(p, "gateway-2", func(s *types.ServiceConfig) { delete(s.Environment, "STRATA_GATEWAY_ENABLE_SASL") })
		}, `gateway-2: STRATA_GATEWAY_ENABLE_SASL "", want true`},
		{"token hash eaten by interpolation", func(p *types.Project) {
			setService(p, "gateway-1", func(s *types.ServiceConfig) {
				v := "admin:*:pbkdf2-sha256"
				s.Environment["STRATA_GATEWAY_SASL_PRINCIPALS"] = &v
			})
		}, `gateway-1: sasl principal entry "admin:\*:pbkdf2-sha256" is not`},
		{"shell probe", func(p *types.Project) {
			setService(p, "metad-2", func(s *types.ServiceConfig) {
				s.HealthCheck.Test = types.HealthCheckTest{"CMD-SHELL", "metad healthcheck"}
			})
		}, `metad-2: healthcheck .* is not exec form`},
		{"probe not on /ready", func(p *types.Project) {
			setService(p, "gateway-1", func(s *types.ServiceConfig) {
				s.HealthCheck.Test = types.HealthCheckTest{"CMD", "gateway", "healthcheck", "--url", "http://127.0.0.1:9080/live"}
			})
		}, `gateway-1: healthcheck .* should be`},
		{"dependency without healthcheck", func(p *types.Project) {
			setService(p, "partitiond-3", func(s *types.ServiceConfig) { s.HealthCheck = nil })
		}, `waits for partitiond-3 to be healthy but partitiond-3 has no healthcheck`},
		{"started condition", func(p *types.Project) {
			setService(p, "gateway-1", func(s *types.ServiceConfig) {
				s.DependsOn["metad-1"] = types.ServiceDependency{Condition: types.ServiceConditionStarted}
			})
		}, `gateway-1: depends on metad-1 with condition "service_started"`},
		{"completion of a server", func(p *types.Project) {
			setService(p, "gateway-1", func(s *types.ServiceConfig) {
				s.DependsOn["metad-1"] = types.ServiceDependency{Condition: types.ServiceConditionCompletedSuccessfully}
			})
		}, `gateway-1: waits for metad-1 to complete but metad-1 is not a one-shot`},
		{"data on a bind mount", func(p *types.Project) {
			setService(p, "partitiond-1", func(s *types.ServiceConfig) {
				s.Volumes[0] = types.ServiceVolumeConfig{Type: types.VolumeTypeBind, Source: "/tmp/p1", Target: "/data"}
			})
		}, `partitiond-1: data dir /data is a bind mount, want a named volume`},
		{"no data volume", func(p *types.Project) {
			setService(p, "metad-3", func(s *types.ServiceConfig) { s.Volumes = s.Volumes[1:] })
		}, `metad-3: data dir /data is not a mounted volume`},
		{"shared data volume", func(p *types.Project) {
			setService(p, "partitiond-2", func(s *types.ServiceConfig) { s.Volumes[0].Source = "partitiond-1-data" })
		}, `data volume partitiond-1-data shared with`},
		{"internal port published", func(p *types.Project) {
			setService(p, "partitiond-2", func(s *types.ServiceConfig) {
				s.Ports = []types.ServicePortConfig{{HostIP: "127.0.0.1", Published: "9192", Target: 9192}}
			})
		}, `partitiond-2: publishes port 9192; only gateways publish ports`},
		{"gateway on all interfaces", func(p *types.Project) {
			setService(p, "gateway-2", func(s *types.ServiceConfig) { s.Ports[0].HostIP = "" })
		}, `gateway-2: port 9001:9000 published on "", not on loopback`},
		{"build section", func(p *types.Project) {
			setService(p, "coordinatord-1", func(s *types.ServiceConfig) { s.Build = &types.BuildConfig{Context: "."} })
		}, `coordinatord-1: has a build section`},
		{"node id mismatch", func(p *types.Project) {
			setService(p, "coordinatord-2", func(s *types.ServiceConfig) { s.Environment["STRATA_NODE_ID"] = ptr("coord-2") })
		}, `coordinatord-2: STRATA_NODE_ID "coord-2" differs`},
		{"certificate not issued", func(p *types.Project) {
			setService(p, "certs", func(s *types.ServiceConfig) {
				s.Command = slices.DeleteFunc(s.Command, func(a string) bool { return a == "--node=gateway/gateway-2" })
			})
		}, `gateway-2: no certs one-shot issues --node=gateway/gateway-2`},
		{"metad missing from voters", func(p *types.Project) {
			setService(p, "metad-1", func(s *types.ServiceConfig) {
				s.Environment["STRATA_METAD_VOTERS"] = ptr("metad-1=metad-1:9191,metad-2=metad-2:9191")
			})
		}, `metad-1: STRATA_METAD_VOTERS .* lacks metad-3`},
		{"replication factor", func(p *types.Project) {
			setService(p, "metad-2", func(s *types.ServiceConfig) { s.Environment["STRATA_METAD_DEFAULT_REPLICATION_FACTOR"] = ptr("1") })
		}, `metad-2: STRATA_METAD_DEFAULT_REPLICATION_FACTOR "1", want 3`},
		{"partitiond min ISR disagrees with metad's", func(p *types.Project) {
			setService(p, "partitiond-3", func(s *types.ServiceConfig) { s.Environment["STRATA_PARTITIOND_MIN_INSYNC_REPLICAS"] = ptr("1") })
		}, `partitiond-3: STRATA_PARTITIOND_MIN_INSYNC_REPLICAS "1", want 2`},
		{"missing gateway", func(p *types.Project) { delete(p.Services, "gateway-2") }, `stack has 1 gateway services, want 2`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := load(t)
			c.mutate(p)
			errs := Check(p)
			re := regexp.MustCompile(c.want)
			if !slices.ContainsFunc(errs, re.MatchString) {
				t.Fatalf("want an error matching %q, got:\n  %s", c.want, strings.Join(errs, "\n  "))
			}
		})
	}
}

// The observability profile loads the alert rules into Prometheus and the
// dashboards into Grafana: each mount's source exists, and the in-container
// paths are the ones prometheus.yml and the Grafana provisioning files name.
func TestObservabilityProfileMountsDashboardsAndRules(t *testing.T) {
	p := load(t)
	mounts := func(service string) map[string]string { // target -> source
		out := map[string]string{}
		for _, v := range p.Services[service].Volumes {
			if v.Type == types.VolumeTypeBind {
				if _, err := os.Stat(v.Source); err != nil {
					t.Errorf("%s: bind source %s: %v", service, v.Source, err)
				}
				out[v.Target] = v.Source
			}
		}
		return out
	}
	var prom struct {
		RuleFiles []string `yaml:"rule_files"`
	}
	readYAML(t, "prometheus.yml", &prom)
	pm := mounts("prometheus")
	if len(prom.RuleFiles) == 0 {
		t.Fatal("prometheus.yml loads no rule files")
	}
	for _, rf := range prom.RuleFiles {
		if src, ok := pm[rf]; !ok || filepath.Base(src) != "strata-rules.yaml" {
			t.Errorf("rule file %s is not the mounted deploy/prometheus/strata-rules.yaml (mounts %v)", rf, pm)
		}
	}

	gm := mounts("grafana")
	var provider struct {
		Providers []struct {
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, "../grafana/provisioning/dashboards/strata.yaml", &provider)
	if len(provider.Providers) != 1 {
		t.Fatalf("want one dashboard provider, have %d", len(provider.Providers))
	}
	dash, ok := gm[provider.Providers[0].Options.Path]
	if !ok || filepath.Base(dash) != "dashboards" {
		t.Errorf("provider path %s is not the mounted deploy/grafana/dashboards (mounts %v)", provider.Providers[0].Options.Path, gm)
	}
	if files, _ := filepath.Glob(filepath.Join(dash, "*.json")); len(files) < 5 {
		t.Errorf("%d dashboards under %s, want 5", len(files), dash)
	}
	if src := gm["/etc/grafana/provisioning"]; filepath.Base(src) != "provisioning" {
		t.Errorf("grafana provisioning not mounted at /etc/grafana/provisioning (mounts %v)", gm)
	}
	var ds struct {
		Datasources []struct {
			Type string `yaml:"type"`
			URL  string `yaml:"url"`
		} `yaml:"datasources"`
	}
	readYAML(t, "../grafana/provisioning/datasources/strata.yaml", &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].URL != "http://prometheus:9090" {
		t.Errorf("grafana data source %+v, want the profile's prometheus", ds.Datasources)
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// The image is FROM scratch only: nothing is pulled when it is built.
func TestDockerfileIsFromScratch(t *testing.T) {
	data, err := os.ReadFile("../docker/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	froms := 0
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && strings.EqualFold(f[0], "FROM") {
			froms++
			if len(f) != 2 || f[1] != "scratch" {
				t.Errorf("Dockerfile: %q pulls a base image", line)
			}
		}
	}
	if froms == 0 {
		t.Fatal("Dockerfile has no FROM")
	}
}

// docker-compose 1.29 (Python) parses the file the same way: `config -q`
// validates without a Docker engine. Skipped where it is not installed.
func TestDockerCompose129Parses(t *testing.T) {
	bin, err := exec.LookPath("docker-compose")
	if err != nil {
		t.Skip("docker-compose not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-f", stackFile, "--profile", "observability", "config", "-q")
	cmd.Env = append(os.Environ(), "COMPOSE_PROJECT_NAME=strata-validate")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker-compose config: %v\n%s", err, out)
	}
}

func setService(p *types.Project, name string, f func(*types.ServiceConfig)) {
	s := p.Services[name]
	f(&s)
	p.Services[name] = s
}

func ptr(s string) *string { return &s }

func itoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }
