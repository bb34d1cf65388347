// Package compose checks the docker-compose file of Strata's full stack
// (deploy/compose/docker-compose.yml) offline, with compose-go: the rules a
// reviewer would otherwise check by eye and that only show up at `up` time
// on a real engine (start order, probes that need a shell the FROM scratch
// image lacks, data on anonymous storage, ports leaking beyond loopback,
// certificates that do not match node ids).
package compose

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

// Roles of the Strata binaries a service may run (its command's first word).
var roles = []string{"metad", "partitiond", "coordinatord", "gateway"}

// statefulRoles keep data that must survive container re-creation.
var statefulRoles = []string{"metad", "partitiond"}

// Load reads a compose file with every profile enabled (so optional services
// are checked too) and env as the only interpolation environment, so the
// result does not depend on the caller's shell.
func Load(ctx context.Context, path string, env map[string]string) (*types.Project, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	details := types.ConfigDetails{
		WorkingDir:  filepath.Dir(abs),
		ConfigFiles: []types.ConfigFile{{Filename: abs}},
		Environment: env,
	}
	return loader.LoadWithContext(ctx, details, func(o *loader.Options) {
		o.SetProjectName("strata", true)
		o.Profiles = []string{"*"}
	})
}

// Role returns the Strata role a service runs ("" for other images and for
// the strata CLI one-shots).
func Role(s types.ServiceConfig) string {
	if len(s.Command) > 0 && slices.Contains(roles, s.Command[0]) {
		return s.Command[0]
	}
	return ""
}

// oneShot reports whether s runs to completion instead of serving.
func oneShot(s types.ServiceConfig) bool {
	return Role(s) == "" && len(s.Command) > 0 && s.Command[0] == "strata" && (s.Restart == "" || s.Restart == "no")
}

// Check returns every rule p breaks, sorted; nil when p is fine.
func Check(p *types.Project) []string {
	var errs []string
	bad := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }

	counts := map[string]int{}
	for name, s := range p.Services {
		role := Role(s)
		counts[role]++
		defaultProfile := len(s.Profiles) == 0

		// Images come from `make image` or a registry; a build section
		// would pull a base image, which this machine cannot.
		if s.Build != nil {
			bad("%s: has a build section; use the image built by make image", name)
		}

		// Start order only by readiness or completion.
		for dep, d := range s.DependsOn {
			target, ok := p.Services[dep]
			if !ok {
				bad("%s: depends on unknown service %s", name, dep)
				continue
			}
			switch d.Condition {
			case types.ServiceConditionHealthy:
				if target.HealthCheck == nil || target.HealthCheck.Disable || len(target.HealthCheck.Test) == 0 {
					bad("%s: waits for %s to be healthy but %s has no healthcheck", name, dep, dep)
				}
			case types.ServiceConditionCompletedSuccessfully:
				if !oneShot(target) {
					bad("%s: waits for %s to complete but %s is not a one-shot (strata command, restart no)", name, dep, dep)
				}
			default:
				bad("%s: depends on %s with condition %q; want service_healthy or service_completed_successfully", name, dep, d.Condition)
			}
		}

		// Probes: exec form, since the image has no shell.
		if hc := s.HealthCheck; hc != nil && !hc.Disable {
			if len(hc.Test) < 2 || hc.Test[0] != "CMD" {
				bad("%s: healthcheck %q is not exec form [\"CMD\", ...]", name, []string(hc.Test))
			} else if role != "" && !(hc.Test[1] == role && slices.Contains(hc.Test, "healthcheck") && strings.HasSuffix(hc.Test[len(hc.Test)-1], "/ready")) {
				bad("%s: healthcheck %q should be [CMD %s healthcheck --url .../ready]", name, []string(hc.Test), role)
			}
		}
		if role != "" && (s.HealthCheck == nil || s.HealthCheck.Disable) {
			bad("%s: %s service without a healthcheck", name, role)
		}

		// Published ports: loopback only; in the default stack only gateways.
		for _, port := range s.Ports {
			if port.Published == "" {
				continue
			}
			if ip := net.ParseIP(port.HostIP); ip == nil || !ip.IsLoopback() {
				bad("%s: port %s:%d published on %q, not on loopback", name, port.Published, port.Target, port.HostIP)
			}
			if defaultProfile && role != "gateway" {
				bad("%s: publishes port %d; only gateways publish ports", name, port.Target)
			}
		}
		if role != "" {
			checkNode(p, name, s, bad)
		}
	}
	for _, want := range []struct {
		role string
		n    int
	}{{"metad", 3}, {"partitiond", 3}, {"coordinatord", 2}, {"gateway", 2}} {
		if counts[want.role] != want.n {
			bad("stack has %d %s services, want %d", counts[want.role], want.role, want.n)
		}
	}
	sort.Strings(errs)
	return errs
}

// checkNode checks one role service: its data directory is a named volume
// when the role is stateful, its node id is its service name (the DNS SAN of
// its certificate), its certificate files are the ones the certs one-shot
// issues for it, and it knows every metad.
// principalEntry is the shape of a gateway.sasl_principals entry
// (gateway/internal/auth checks it fully at startup).
var principalEntry = regexp.MustCompile(`^[A-Za-z0-9._@=-]+:[a-z.*+]+:pbkdf2-sha256\$[0-9]+\$[A-Za-z0-9_-]+\$[A-Za-z0-9_-]+$`)

func checkNode(p *types.Project, name string, s types.ServiceConfig, bad func(string, ...any)) {
	role := Role(s)
	env := func(k string) string {
		if v := s.Environment[k]; v != nil {
			return *v
		}
		return ""
	}
	if slices.Contains(statefulRoles, role) {
		dataDir := env("STRATA_DATA_DIR")
		if dataDir == "" {
			bad("%s: STRATA_DATA_DIR not set", name)
		}
		i := slices.IndexFunc(s.Volumes, func(v types.ServiceVolumeConfig) bool { return v.Target == dataDir })
		switch {
		case i < 0:
			bad("%s: data dir %s is not a mounted volume", name, dataDir)
		case s.Volumes[i].Type != types.VolumeTypeVolume || s.Volumes[i].Source == "":
			bad("%s: data dir %s is a %s mount, want a named volume", name, dataDir, s.Volumes[i].Type)
		default:
			if _, ok := p.Volumes[s.Volumes[i].Source]; !ok {
				bad("%s: volume %s is not declared", name, s.Volumes[i].Source)
			}
			for other, o := range p.Services {
				if other != name && slices.ContainsFunc(o.Volumes, func(v types.ServiceVolumeConfig) bool { return v.Source == s.Volumes[i].Source }) {
					bad("%s: data volume %s shared with %s", name, s.Volumes[i].Source, other)
				}
			}
		}
	}
	if role == "gateway" {
		// Client authentication is on, with principal entries whose token
		// hashes survived compose interpolation (`$$` for every `$`).
		if env("STRATA_GATEWAY_ENABLE_SASL") != "true" {
			bad("%s: STRATA_GATEWAY_ENABLE_SASL %q, want true", name, env("STRATA_GATEWAY_ENABLE_SASL"))
		}
		entries := env("STRATA_GATEWAY_SASL_PRINCIPALS")
		if entries == "" {
			bad("%s: STRATA_GATEWAY_SASL_PRINCIPALS is empty", name)
		}
		for _, e := range strings.Split(entries, ",") {
			if !principalEntry.MatchString(e) {
				bad("%s: sasl principal entry %q is not name:perms:pbkdf2-sha256$<n>$<salt>$<key>", name, e)
			}
		}
	}
	if id := env("STRATA_NODE_ID"); id != name {
		bad("%s: STRATA_NODE_ID %q differs from the service name", name, id)
	}
	stem := "/certs/" + role + "-" + name
	if env("STRATA_TLS_CERT") != stem+".crt" || env("STRATA_TLS_KEY") != stem+".key" || env("STRATA_TLS_CA") == "" {
		bad("%s: TLS files %q %q, want %s.crt/.key and a CA", name, env("STRATA_TLS_CERT"), env("STRATA_TLS_KEY"), stem)
	}
	issued := false
	for _, c := range p.Services {
		if oneShot(c) && slices.Contains(c.Command, "certs") && slices.Contains(c.Command, "--node="+role+"/"+name) {
			issued = true
			if _, ok := s.DependsOn[c.Name]; !ok {
				bad("%s: does not wait for the certs one-shot %s", name, c.Name)
			}
		}
	}
	if !issued {
		bad("%s: no certs one-shot issues --node=%s/%s", name, role, name)
	}
	metads := splitSet(env("STRATA_METAD_ADDRS"))
	for other, o := range p.Services {
		if Role(o) == "metad" && !slices.Contains(metads, other+":9190") {
			bad("%s: STRATA_METAD_ADDRS %q lacks %s:9190", name, env("STRATA_METAD_ADDRS"), other)
		}
	}
	if adv := env("STRATA_RPC_ADVERTISE"); !strings.HasPrefix(adv, name+":") {
		bad("%s: STRATA_RPC_ADVERTISE %q is not %s:<port>", name, adv, name)
	}
	if role == "metad" {
		voters := splitSet(env("STRATA_METAD_VOTERS"))
		for other, o := range p.Services {
			if Role(o) == "metad" && !slices.Contains(voters, other+"="+other+":9191") {
				bad("%s: STRATA_METAD_VOTERS %q lacks %s", name, env("STRATA_METAD_VOTERS"), other)
			}
		}
		// Three partition servers: replication factor 3, min ISR 2.
		if env("STRATA_METAD_DEFAULT_REPLICATION_FACTOR") != "3" {
			bad("%s: STRATA_METAD_DEFAULT_REPLICATION_FACTOR %q, want 3", name, env("STRATA_METAD_DEFAULT_REPLICATION_FACTOR"))
		}
		if env("STRATA_METAD_MIN_INSYNC_REPLICAS") != "2" {
			bad("%s: STRATA_METAD_MIN_INSYNC_REPLICAS %q, want 2", name, env("STRATA_METAD_MIN_INSYNC_REPLICAS"))
		}
	}
	// metad reports the effective min ISR; partitiond enforces it: the two
	// must agree, and __consumer_offsets is replicated like any topic.
	if role == "partitiond" && env("STRATA_PARTITIOND_MIN_INSYNC_REPLICAS") != "2" {
		bad("%s: STRATA_PARTITIOND_MIN_INSYNC_REPLICAS %q, want 2", name, env("STRATA_PARTITIOND_MIN_INSYNC_REPLICAS"))
	}
	if role == "coordinatord" && env("STRATA_COORDINATORD_OFFSETS_REPLICATION_FACTOR") != "3" {
		bad("%s: STRATA_COORDINATORD_OFFSETS_REPLICATION_FACTOR %q, want 3", name, env("STRATA_COORDINATORD_OFFSETS_REPLICATION_FACTOR"))
	}
}

func splitSet(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
