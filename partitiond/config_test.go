package partitiond

import (
	"testing"
	"time"

	"github.com/strataio/strata/libs/errcode"
)

// TestConfigValidation: the defaults pass; a setting below its min tag and
// a broken rule between settings are invalid_parameter naming the setting.
func TestConfigValidation(t *testing.T) {
	valid := func() Config {
		c := DefaultConfig()
		c.MetadAddrs = []string{"127.0.0.1:9190"}
		return c
	}
	c := valid()
	if err := c.validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, tc := range []struct {
		param  string
		mutate func(*Config)
	}{
		{"partitiond.segment_bytes", func(c *Config) { c.SegmentBytes = 4095 }},
		{"partitiond.replica_lag_time_max", func(c *Config) { c.ReplicaLagTimeMax = 0 }},
		{"partitiond.view_catch_up", func(c *Config) { c.ViewCatchUp = -time.Millisecond }},
		{"partitiond.fetch_max_bytes", func(c *Config) { c.FetchMaxBytes = c.FetchMaxBytesLimit + 1 }},
		{"partitiond.default_cleanup_policy", func(c *Config) { c.DefaultCleanupPolicy = "keep" }},
	} {
		c := valid()
		tc.mutate(&c)
		e, ok := errcode.As(c.validate())
		if !ok || e.Code != errcode.InvalidParameter.Name() || e.Field("param") != tc.param {
			t.Errorf("%s: got %v", tc.param, e)
		}
	}
}
