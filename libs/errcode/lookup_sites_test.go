package errcode

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// lookupSites are the only functions of the workspace that may call Lookup:
// each decodes a code that came from a peer (a gRPC status, an error payload
// or text of another broker), where the name is data, not a choice of ours.
// Codes Strata raises itself are catalogue values (errcode.MissingTopic),
// never names typed again or built from strings ("missing_"+param), so a
// code cannot drift from its registered class, and the catalogue lists
// every code a client can see.
var lookupSites = map[string]string{
	"libs/errcode/grpc.go FromProto":                                    "decodes the proto form of a peer's error",
	"libs/errcode/errcode.go ParseText":                                 "decodes the readable error text of a peer",
	"libs/errcode/errcode_test.go TestLookupDerivesUnregisteredClasses": "specifies Lookup's fallback for unregistered names",
}

// TestCodesAreNotBuiltFromStrings scans every module of the workspace for
// calls of Lookup outside lookupSites, and for a Lookup whose argument is
// built from a string literal even there.
func TestCodesAreNotBuiltFromStrings(t *testing.T) {
	root, modules := workspace(t)
	errcodePath := strconv.Quote("github.com/strataio/strata/libs/errcode")
	seen := map[string]bool{}
	for _, mod := range modules {
		err := filepath.WalkDir(filepath.Join(root, mod), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if n := d.Name(); path != filepath.Join(root, mod) && (n == "testdata" || n == "vendor" || strings.HasPrefix(n, ".")) {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") {
				return nil
			}
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			// The name Lookup is called by: unqualified inside package
			// errcode, else through the file's import of errcode.
			qual := ""
			if f.Name.Name != "errcode" || !strings.HasPrefix(rel, "libs/errcode/") {
				qual = "-"
				for _, imp := range f.Imports {
					if imp.Path.Value == errcodePath {
						qual = "errcode"
						if imp.Name != nil {
							qual = imp.Name.Name
						}
					}
				}
				if qual == "-" {
					return nil
				}
			}
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				site := rel + " " + funcName(fn)
				ast.Inspect(fn.Body, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok || !isLookup(call.Fun, qual) {
						return true
					}
					if _, ok := lookupSites[site]; !ok {
						t.Errorf("%s: Lookup builds a code from a name; use the catalogue value (add the code to catalogue.go), or list the site in lookupSites if it decodes a peer's code", site)
						return true
					}
					seen[site] = true
					if !strings.HasSuffix(rel, "_test.go") && len(call.Args) == 1 && hasStringLiteral(call.Args[0]) {
						t.Errorf("%s: Lookup of a string literal; use the catalogue value", site)
					}
					return true
				})
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for site := range lookupSites {
		if !seen[site] {
			t.Errorf("lookupSites lists %q, which calls Lookup no more: remove it", site)
		}
	}
}

func isLookup(fun ast.Expr, qual string) bool {
	switch f := fun.(type) {
	case *ast.Ident:
		return qual == "" && f.Name == "Lookup"
	case *ast.SelectorExpr:
		x, ok := f.X.(*ast.Ident)
		return ok && qual != "" && x.Name == qual && f.Sel.Name == "Lookup"
	}
	return false
}

// funcName is Name, or Recv.Name for a method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	if g, ok := typ.(*ast.IndexExpr); ok {
		typ = g.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}

func hasStringLiteral(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			found = true
		}
		return !found
	})
	return found
}

var useLine = regexp.MustCompile(`(?m)^\s*\.?/?([A-Za-z0-9_./-]+)\s*$`)

// workspace finds the go.work above this package and returns its directory
// and the module directories it uses. Outside a checkout (the module cache)
// there is nothing to scan and the test is skipped.
func workspace(t *testing.T) (string, []string) {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.work"))
		if err == nil {
			_, block, ok := strings.Cut(string(data), "use (")
			block, _, _ = strings.Cut(block, ")")
			if !ok {
				t.Fatal("go.work has no use block")
			}
			var mods []string
			for _, m := range useLine.FindAllStringSubmatch(block, -1) {
				mods = append(mods, m[1])
			}
			if len(mods) == 0 {
				t.Fatal("go.work uses no module")
			}
			return dir, mods
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("no go.work above the package: not in a workspace checkout")
		}
		dir = parent
	}
}
