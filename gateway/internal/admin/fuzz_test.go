package admin

import (
	"testing"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// FuzzTopicParams drives the topic commands' own checks (topic names,
// min_in_sync_replicas, if_exists) with arbitrary input: no panic, and
// every failure a typed error.
func FuzzTopicParams(f *testing.F) {
	f.Add("CREATE topic=a.b partitions=-1 min_in_sync_replicas=default if_exists=maybe", "a.b")
	f.Add("ALTER_TOPIC_CONFIG topic=t min_in_sync_replicas=0", "..")
	f.Fuzz(func(t *testing.T, text, name string) {
		validTopicName(name)
		if _, r, err := wire.ParseText(text); err == nil {
			_, ieErr := ifExists(&r)
			for _, err := range []error{ieErr, checkMinISR(r.Value("min_in_sync_replicas"))} {
				if _, ok := errcode.As(err); err != nil && !ok {
					t.Fatalf("untyped error %T: %v", err, err)
				}
			}
		}
	})
}
