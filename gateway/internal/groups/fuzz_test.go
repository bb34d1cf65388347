package groups

import (
	"testing"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// FuzzBatchOffsets drives the raw offset list reading of BATCH_COMMIT and
// RESET_OFFSETS: no panic, every failure a typed error, and what passes is
// the offsets field or the single positional, bounded in length.
func FuzzBatchOffsets(f *testing.F) {
	for _, s := range []string{
		"BATCH_COMMIT topic=t group=g member=m generation=3 offsets=P0:1,P1:2",
		"BATCH_COMMIT topic=t group=g member=m generation=x P0:1",
		"RESET_OFFSETS group=g topic=t offsets=P0:0,P3:18446744073709551615",
		"RESET_OFFSETS group=g topic=t P0:1 P1:2",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		_, r, err := wire.ParseText(text)
		if err != nil {
			return
		}
		list, err := batchOffsets(&r)
		if _, ok := errcode.As(err); err != nil && !ok {
			t.Fatalf("untyped error %T: %v", err, err)
		}
		if err == nil && len(list) > 64<<10 {
			t.Fatalf("a list of %d bytes passed", len(list))
		}
	})
}
