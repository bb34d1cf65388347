// Package config loads a process configuration struct in layers:
// embedded defaults < YAML file (strict: unknown keys fail) < environment
// (STRATA_ + upper snake case of the YAML path, plus spec-named aliases such
// as HEALTH_CHECK_PORT) < command-line flags (--<yaml.path>, dots kept,
// underscores as dashes). One struct definition with tags is the single
// place a setting is declared:
//
//	type Config struct {
//		DataDir string `yaml:"data_dir" help:"data directory"`
//		Health  int    `yaml:"health_check_port" env:"HEALTH_CHECK_PORT" help:"..."`
//		Token   string `yaml:"token" secret:"true" help:"..."`
//	}
//
// A `min` tag bounds a numeric or duration setting from below, written as
// its values are (min:"1", min:"100ms"); Check enforces it, so the bound
// stands beside the setting instead of in a hand-written validation switch.
//
// Supported leaf types: string, bool, int, int32, int64, uint32, uint64,
// float64, time.Duration and []string (comma separated in env and flags).
// Nested structs become YAML sections and dotted paths.
package config
