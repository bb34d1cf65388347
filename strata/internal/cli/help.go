package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// errOut is the stderr a command receives: it also carries stdout, so that
// a flag set (whose output is stderr for errors) prints --help to stdout.
// MainContext wraps stderr once; commands pass it on unchanged.
type errOut struct {
	io.Writer
	stdout io.Writer
}

// helpWriter is where help goes for a command whose stderr is w.
func helpWriter(w io.Writer) io.Writer {
	if e, ok := w.(*errOut); ok {
		return e.stdout
	}
	return w
}

// aliasMark starts the usage of a short alias flag ("-t" for "--topic"):
// the flag shares its long form's value, and help prints both on one line.
const aliasMark = "\x00alias:"

// alias makes -short another name of the flag --long defined on fs.
func alias(fs *flag.FlagSet, short, long string) {
	f := fs.Lookup(long)
	if f == nil {
		panic("cli: alias of undefined flag " + long)
	}
	fs.Var(f.Value, short, aliasMark+long)
}

// flagInfo is a flag as help, completion and the docs show it.
type flagInfo struct {
	Name, Short, Type, Usage, Default string
	IsBool                            bool
}

// flagInfos lists the flags of fs (aliases folded into their long flag),
// sorted by name.
func flagInfos(fs *flag.FlagSet) []flagInfo {
	shorts := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) {
		if long, ok := strings.CutPrefix(f.Usage, aliasMark); ok {
			shorts[long] = f.Name
		}
	})
	var out []flagInfo
	fs.VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Usage, aliasMark) {
			return
		}
		typ, usage := flag.UnquoteUsage(f)
		fi := flagInfo{Name: f.Name, Short: shorts[f.Name], Type: typ, Usage: usage}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			fi.IsBool, fi.Type = true, ""
		}
		switch f.DefValue {
		case "", "0", "false", "0s", "[]":
		default:
			fi.Default = f.DefValue
		}
		out = append(out, fi)
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// printFlags writes the flags of fs as "-t, --topic string" lines with
// their usage below, in place of flag.PrintDefaults.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	for _, f := range flagInfos(fs) {
		name := "      --" + f.Name
		if f.Short != "" {
			name = "  -" + f.Short + ", --" + f.Name
		}
		if f.Type != "" {
			name += " " + f.Type
		}
		usage := f.Usage
		if f.Default != "" {
			usage += fmt.Sprintf(" (default %q)", f.Default)
		}
		fmt.Fprintf(w, "%s\n        %s\n", name, strings.ReplaceAll(usage, "\n", "\n        "))
	}
}

// parseFlags runs fs.Parse with the help and error handling every command
// shares: --help prints the usage on stdout (the caller exits 0), an
// unknown flag is reported with the closest known flag, then the usage, on
// stderr.
func parseFlags(fs *flag.FlagSet, args []string) error {
	out := fs.Output()
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	err := fs.Parse(args)
	fs.SetOutput(out)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(helpWriter(out))
		fs.Usage()
		fs.SetOutput(out)
		return err
	}
	fmt.Fprintf(out, "%s: %v\n", fs.Name(), err)
	if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: "); ok {
		var names []string
		for _, f := range flagInfos(fs) {
			names = append(names, f.Name)
		}
		switch s := suggest(strings.TrimLeft(name, "-"), names); {
		case name == "-o":
			// kubectl's habit; here -o is consume's --from, as in rpk and kcat.
			fmt.Fprintln(out, "the output format is --output table|json|yaml (-o is consume's --from, as in rpk and kcat)")
		case len(s) > 0:
			fmt.Fprintf(out, "did you mean --%s?\n", strings.Join(s, " or --"))
		}
	}
	fmt.Fprintln(out)
	fs.Usage()
	return err
}

// suggest returns the candidates close to name (edit distance at most 2,
// or name a prefix of at least 3 letters), closest first, as cobra and git
// suggest them.
func suggest(name string, candidates []string) []string {
	type hit struct {
		s string
		d int
	}
	var hits []hit
	for _, c := range candidates {
		d := editDistance(strings.ToLower(name), strings.ToLower(c))
		if d <= 2 || (len(name) >= 3 && strings.HasPrefix(c, name)) {
			hits = append(hits, hit{c, d})
		}
	}
	sort.SliceStable(hits, func(i, j int) bool { return hits[i].d < hits[j].d })
	var out []string
	for _, h := range hits {
		if h.s != name {
			out = append(out, h.s)
		}
	}
	return out
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// didYouMean is the suggestion line for an unknown name, or "".
func didYouMean(name string, candidates []string) string {
	s := suggest(name, candidates)
	if len(s) == 0 {
		return ""
	}
	return fmt.Sprintf("did you mean %q?\n", s[0])
}
