package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// EnvPrefix prefixes every generated environment variable name.
const EnvPrefix = "STRATA_"

// field is one leaf setting of a config struct.
type field struct {
	path   string   // dotted yaml path, e.g. "gateway.client_addr"
	env    []string // environment names, generated first then aliases
	help   string
	secret bool
	min    string // the `min` tag: the least valid value (Check)
	v      reflect.Value
}

func (f field) flagName() string { return strings.ReplaceAll(f.path, "_", "-") }

// fields walks cfg (a pointer to struct) and returns its leaves.
func fields(cfg any) ([]field, error) {
	rv := reflect.ValueOf(cfg)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return nil, errors.New("config: want a pointer to a struct")
	}
	var out []field
	var walk func(v reflect.Value, prefix string) error
	walk = func(v reflect.Value, prefix string) error {
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			if !sf.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
			if name == "-" {
				continue
			}
			// `yaml:",inline"` flattens an embedded struct (node.Common in
			// role binaries) into the parent's paths, as yaml.v3 does.
			if name == "" && opts == "inline" && sf.Type.Kind() == reflect.Struct {
				if err := walk(v.Field(i), prefix); err != nil {
					return err
				}
				continue
			}
			if name == "" {
				return fmt.Errorf("config: field %s.%s has no yaml tag", t.Name(), sf.Name)
			}
			path := name
			if prefix != "" {
				path = prefix + "." + name
			}
			fv := v.Field(i)
			if sf.Type.Kind() == reflect.Struct && sf.Type != reflect.TypeOf(time.Duration(0)) {
				if err := walk(fv, path); err != nil {
					return err
				}
				continue
			}
			if !supported(sf.Type) {
				return fmt.Errorf("config: field %s has unsupported type %s", path, sf.Type)
			}
			f := field{path: path, help: sf.Tag.Get("help"), secret: sf.Tag.Get("secret") == "true", min: sf.Tag.Get("min"), v: fv}
			f.env = append(f.env, EnvPrefix+strings.ToUpper(strings.ReplaceAll(path, ".", "_")))
			if alias := sf.Tag.Get("env"); alias != "" {
				f.env = append(f.env, strings.Split(alias, ",")...)
			}
			out = append(out, f)
		}
		return nil
	}
	if err := walk(rv.Elem(), ""); err != nil {
		return nil, err
	}
	return out, nil
}

func supported(t reflect.Type) bool {
	if t == reflect.TypeOf(time.Duration(0)) {
		return true
	}
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint32, reflect.Uint64, reflect.Float64:
		return true
	case reflect.Slice:
		return t.Elem().Kind() == reflect.String
	}
	return false
}

// set parses s into the field's value.
func (f field) set(s string) error {
	v := f.v
	if v.Type() == reflect.TypeOf(time.Duration(0)) {
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%s: %w", f.path, err)
		}
		v.SetInt(int64(d))
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("%s: %q is not a boolean", f.path, s)
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, v.Type().Bits())
		if err != nil {
			return fmt.Errorf("%s: %q is not an integer", f.path, s)
		}
		v.SetInt(n)
	case reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(s, 10, v.Type().Bits())
		if err != nil {
			return fmt.Errorf("%s: %q is not an unsigned integer", f.path, s)
		}
		v.SetUint(n)
	case reflect.Float64:
		n, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("%s: %q is not a number", f.path, s)
		}
		v.SetFloat(n)
	case reflect.Slice:
		var parts []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				parts = append(parts, p)
			}
		}
		v.Set(reflect.ValueOf(parts))
	}
	return nil
}

func (f field) String() string {
	v := f.v
	if v.Type() == reflect.TypeOf(time.Duration(0)) {
		return time.Duration(v.Int()).String()
	}
	if v.Kind() == reflect.Slice {
		return strings.Join(v.Interface().([]string), ",")
	}
	return fmt.Sprint(v.Interface())
}

// Loader loads one config struct. Create it with New, register flags on a
// FlagSet, parse the command line, then call Load.
type Loader struct {
	cfg    any
	fields []field
	flags  map[string]*flagValue
	// Lookup reads the environment (os.LookupEnv by default).
	Lookup func(string) (string, bool)
}

// New prepares a loader for cfg, which must already hold the defaults.
func New(cfg any) (*Loader, error) {
	fs, err := fields(cfg)
	if err != nil {
		return nil, err
	}
	return &Loader{cfg: cfg, fields: fs, flags: map[string]*flagValue{}, Lookup: os.LookupEnv}, nil
}

// flagValue records a flag's text without touching the struct, so flags are
// applied last regardless of parse order.
type flagValue struct {
	set  bool
	text string
	def  string
	bool bool
}

func (v *flagValue) String() string     { return v.def }
func (v *flagValue) Set(s string) error { v.set, v.text = true, s; return nil }
func (v *flagValue) IsBoolFlag() bool   { return v.bool }

// RegisterFlags adds a --<path> flag for every setting to fs.
func (l *Loader) RegisterFlags(fs *flag.FlagSet) {
	for _, f := range l.fields {
		fv := &flagValue{def: f.String(), bool: f.v.Kind() == reflect.Bool}
		l.flags[f.path] = fv
		help := f.help
		if help == "" {
			help = f.path
		}
		fs.Var(fv, f.flagName(), fmt.Sprintf("%s (env %s)", help, strings.Join(f.env, ", ")))
	}
}

// Load applies the YAML file (when path is not empty), then environment,
// then flags set on the command line. Unknown YAML keys are errors.
func (l *Loader) Load(path string) error {
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		// An empty file decodes as io.EOF: no settings, not an error.
		if err := dec.Decode(l.cfg); err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("config: %s: %w", path, err)
		}
	}
	var errs []error
	for _, f := range l.fields {
		for _, name := range f.env {
			if s, ok := l.Lookup(name); ok {
				if err := f.set(s); err != nil {
					errs = append(errs, fmt.Errorf("env %s: %w", name, err))
				}
				break
			}
		}
	}
	for _, f := range l.fields {
		if fv, ok := l.flags[f.path]; ok && fv.set {
			if err := f.set(fv.text); err != nil {
				errs = append(errs, fmt.Errorf("flag --%s: %w", f.flagName(), err))
			}
		}
	}
	return errors.Join(errs...)
}

// Effective returns "path=value" lines of every setting, sorted, with
// secrets redacted, for the one startup log of the effective configuration.
func (l *Loader) Effective() []string {
	out := make([]string, 0, len(l.fields))
	for _, f := range l.fields {
		val := f.String()
		if f.secret && val != "" {
			val = "<redacted>"
		}
		out = append(out, f.path+"="+val)
	}
	sort.Strings(out)
	return out
}
