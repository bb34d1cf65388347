package config

import (
	"reflect"

	"github.com/strataio/strata/libs/errcode"
)

// Check enforces the `min` tags of cfg, a pointer to a configuration
// struct (walked as New walks it): the first setting below its minimum is
// invalid_parameter, with param its path under section (the role's YAML
// section and flag prefix, "" for none). A minimum of the smallest
// positive value (1, 1ns) reads "must be positive", 0 "must not be
// negative".
func Check(section string, cfg any) error {
	fs, err := fields(cfg)
	if err != nil {
		return errcode.Internal.New(err.Error())
	}
	for _, f := range fs {
		if f.min == "" {
			continue
		}
		bound := field{path: f.path, v: reflect.New(f.v.Type()).Elem()}
		if err := bound.set(f.min); err != nil {
			return errcode.Internal.New("config: bad min tag: " + err.Error())
		}
		var below bool
		switch f.v.Kind() {
		case reflect.Int, reflect.Int32, reflect.Int64:
			below = f.v.Int() < bound.v.Int()
		case reflect.Uint32, reflect.Uint64:
			below = f.v.Uint() < bound.v.Uint()
		case reflect.Float64:
			below = f.v.Float() < bound.v.Float()
		default:
			return errcode.Internal.New("config: min tag on non-numeric setting " + f.path)
		}
		if !below {
			continue
		}
		path := f.path
		if section != "" {
			path = section + "." + path
		}
		why := "must be at least " + bound.String()
		switch {
		case bound.isZero():
			why = "must not be negative"
		case bound.isSmallestPositive():
			why = "must be positive"
		}
		return errcode.InvalidParameter.New(path+" "+why+" (is "+f.String()+")", "param", path)
	}
	return nil
}

func (f field) isZero() bool { return f.v.IsZero() }

func (f field) isSmallestPositive() bool {
	switch f.v.Kind() {
	case reflect.Int, reflect.Int32, reflect.Int64:
		return f.v.Int() == 1 // 1 or, for a time.Duration, 1ns
	case reflect.Uint32, reflect.Uint64:
		return f.v.Uint() == 1
	}
	return false
}
