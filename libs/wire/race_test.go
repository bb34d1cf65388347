//go:build race

package wire

// raceEnabled: under -race sync.Pool randomly drops items, so allocation
// counts of pooled paths are not meaningful.
const raceEnabled = true
