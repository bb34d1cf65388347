package config

import (
	"strings"
	"testing"
	"time"

	"github.com/strataio/strata/libs/errcode"
)

type bounded struct {
	Count   int           `yaml:"count" min:"1"`
	Segment int64         `yaml:"segment" min:"4096"`
	Shards  uint32        `yaml:"shards" min:"1"`
	Wait    time.Duration `yaml:"wait" min:"0"`
	Lease   time.Duration `yaml:"lease" min:"100ms"`
	Period  time.Duration `yaml:"period" min:"1ns"`
	Free    int           `yaml:"free"`
}

func valid() bounded {
	return bounded{Count: 1, Segment: 4096, Shards: 1, Lease: 100 * time.Millisecond, Period: time.Nanosecond, Free: -5}
}

func TestCheckEnforcesMinTags(t *testing.T) {
	if err := Check("role", &bounded{}); err == nil {
		t.Fatal("zero values passed")
	}
	v := valid()
	if err := Check("role", &v); err != nil {
		t.Fatalf("the least valid values: %v", err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*bounded)
		param  string
		why    string
	}{
		{"int zero", func(b *bounded) { b.Count = 0 }, "role.count", "must be positive (is 0)"},
		{"int64 below", func(b *bounded) { b.Segment = 4095 }, "role.segment", "must be at least 4096 (is 4095)"},
		{"uint zero", func(b *bounded) { b.Shards = 0 }, "role.shards", "must be positive"},
		{"negative duration", func(b *bounded) { b.Wait = -time.Second }, "role.wait", "must not be negative (is -1s)"},
		{"duration below", func(b *bounded) { b.Lease = 99 * time.Millisecond }, "role.lease", "must be at least 100ms (is 99ms)"},
		{"zero duration", func(b *bounded) { b.Period = 0 }, "role.period", "must be positive (is 0s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := valid()
			tc.mutate(&b)
			e, ok := errcode.As(Check("role", &b))
			if !ok || e.Code != errcode.InvalidParameter.Name() || e.Field("param") != tc.param ||
				!strings.Contains(e.Message, tc.param+" "+tc.why) {
				t.Fatalf("got %v, want invalid_parameter param=%s %q", e, tc.param, tc.why)
			}
		})
	}
}

func TestCheckRefusesABadMinTag(t *testing.T) {
	var cfg struct {
		Name string `yaml:"name" min:"1"`
		N    int    `yaml:"n" min:"one"`
	}
	if e, ok := errcode.As(Check("", &cfg)); !ok || e.Code != errcode.Internal.Name() {
		t.Fatalf("min on a string: %v", e)
	}
	var cfg2 struct {
		N int `yaml:"n" min:"one"`
	}
	if e, ok := errcode.As(Check("", &cfg2)); !ok || e.Code != errcode.Internal.Name() {
		t.Fatalf("unparsable min: %v", e)
	}
}
