// Package rpcpolicy checks and renders the internal gRPC role policy: which
// certificate roles may call each method of each service a Strata role
// serves. The table in docs/security.md is rendered here from the policies
// the running roles actually installed (TestInternalPolicy).
package rpcpolicy

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/strataio/strata/libs/node"
	"github.com/strataio/strata/libs/pki"
)

// ProtoPackagePrefix selects Strata's own services in the protobuf registry
// (strata.meta.v1, strata.partition.v1, ...).
const ProtoPackagePrefix = "strata."

// Row is one method of the table.
type Row struct {
	Service string // full service name, strata.meta.v1.MetadataService
	Method  string
	Server  pki.Role   // the role serving it
	Callers []pki.Role // the roles its policy admits, in pki.KnownRoles order
}

// FullMethod is the gRPC method name the policy is keyed by.
func (r Row) FullMethod() string { return "/" + r.Service + "/" + r.Method }

// ProtoServices returns every Strata service the generated descriptors
// define (linked into this binary), with its method names.
func ProtoServices() map[string][]string {
	out := map[string][]string{}
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if !strings.HasPrefix(string(fd.Package()), ProtoPackagePrefix) {
			return true
		}
		svcs := fd.Services()
		for i := range svcs.Len() {
			sd := svcs.Get(i)
			ms := sd.Methods()
			names := make([]string, 0, ms.Len())
			for j := range ms.Len() {
				names = append(names, string(ms.Get(j).Name()))
			}
			out[string(sd.FullName())] = names
		}
		return true
	})
	return out
}

// Check compares what the roles serve with the generated descriptors and
// their policies. It reports every problem: a Strata service no role
// serves, a service served twice, a registered method (from the service
// descriptor) without a policy entry or with an empty one, an unknown role,
// and a policy entry naming no registered method. On success it returns
// the table rows, sorted by service and method.
func Check(roles []node.RoleRPC, proto map[string][]string) ([]Row, error) {
	var problems []string
	servedBy := map[string]pki.Role{}
	var rows []Row
	for _, rr := range roles {
		registered := map[string]bool{}
		for svc, info := range rr.Services {
			if prev, ok := servedBy[svc]; ok {
				problems = append(problems, fmt.Sprintf("%s is served by both %s and %s", svc, prev, rr.Role))
			}
			servedBy[svc] = rr.Role
			methods := make([]string, 0, len(info.Methods))
			for _, m := range info.Methods {
				methods = append(methods, m.Name)
			}
			// The descriptor is the source of truth for what exists: a
			// method compiled into the proto but missing from the
			// registered ServiceDesc would mean stale generated code.
			if want, ok := proto[svc]; ok && !sameSet(want, methods) {
				problems = append(problems, fmt.Sprintf("%s registered by %s has methods %v, the descriptor defines %v", svc, rr.Role, sorted(methods), sorted(want)))
			}
			for _, m := range methods {
				full := "/" + svc + "/" + m
				registered[full] = true
				callers, ok := rr.Policy[full]
				switch {
				case !ok:
					problems = append(problems, fmt.Sprintf("%s (served by %s) has no policy entry", full, rr.Role))
					continue
				case len(callers) == 0:
					problems = append(problems, fmt.Sprintf("%s (served by %s) has an empty policy entry", full, rr.Role))
					continue
				}
				for _, c := range callers {
					if !slices.Contains(pki.KnownRoles, c) {
						problems = append(problems, fmt.Sprintf("%s names unknown role %q", full, c))
					}
				}
				rows = append(rows, Row{Service: svc, Method: m, Server: rr.Role, Callers: ordered(callers)})
			}
		}
		for full := range rr.Policy {
			if !registered[full] {
				problems = append(problems, fmt.Sprintf("%s policy entry %s names no registered method", rr.Role, full))
			}
		}
	}
	for svc := range proto {
		if _, ok := servedBy[svc]; !ok {
			problems = append(problems, fmt.Sprintf("%s is defined in proto/ but no role serves it (serve it with a policy, or delete it)", svc))
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return nil, fmt.Errorf("internal rpc policy:\n  %s", strings.Join(problems, "\n  "))
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Service != rows[j].Service {
			return rows[i].Service < rows[j].Service
		}
		return rows[i].Method < rows[j].Method
	})
	return rows, nil
}

// Render formats rows as the markdown table of docs/security.md.
func Render(rows []Row) string {
	var b strings.Builder
	b.WriteString("| Service | Method | Served by | Callers (certificate roles) |\n|---|---|---|---|\n")
	for _, r := range rows {
		names := make([]string, len(r.Callers))
		for i, c := range r.Callers {
			names[i] = "`" + string(c) + "`"
		}
		svc := r.Service[strings.LastIndexByte(r.Service, '.')+1:]
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", svc, r.Method, r.Server, strings.Join(names, ", "))
	}
	return b.String()
}

// ordered returns roles in pki.KnownRoles order without duplicates.
func ordered(rs []pki.Role) []pki.Role {
	var out []pki.Role
	for _, k := range pki.KnownRoles {
		if slices.Contains(rs, k) {
			out = append(out, k)
		}
	}
	for _, r := range rs { // unknown roles were reported; keep them visible
		if !slices.Contains(pki.KnownRoles, r) && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

func sorted(s []string) []string {
	c := slices.Clone(s)
	sort.Strings(c)
	return c
}

func sameSet(a, b []string) bool { return slices.Equal(sorted(a), sorted(b)) }
