package offsetlog

import (
	"slices"
	"time"

	"github.com/strataio/strata/coordinatord/internal/group"
)

// Replayed is the state rebuilt from one partition.
type Replayed struct {
	Groups map[string]*group.Group
	// Records counts the data records scanned (control records excluded).
	Records int
	// Offsets counts the committed offsets restored.
	Offsets int
	// TxnMarks counts the pending transactional offset marks restored.
	TxnMarks int
	// Orphans counts records superseded by lifecycle state: offsets of a
	// deleted or re-created group, tombstones of unknown offsets, and
	// records a later record of the same key replaced.
	Orphans int
}

// replayer folds records into the latest value per key (what compaction
// keeps) and joins them at the end, so the result does not depend on
// whether the log was compacted.
type replayer struct {
	latest  map[string]Value
	records int
	dropped int
}

func newReplayer() *replayer { return &replayer{latest: map[string]Value{}} }

func (r *replayer) add(v Value) {
	r.records++
	if v.Type == TypeOwner {
		return
	}
	k := v.Key()
	if _, ok := r.latest[k]; ok {
		r.dropped++
	}
	r.latest[k] = v
}

func (r *replayer) result() *Replayed {
	out := &Replayed{Groups: map[string]*group.Group{}, Records: r.records, Orphans: r.dropped}
	for _, v := range r.latest {
		switch v.Type {
		case TypeGroup:
			g := group.New(v.Group, *v.Selector, v.Partitions, v.Incarnation)
			for t, e := range v.Lifecycle {
				g.Lifecycle[t] = e
			}
			out.Groups[v.Group] = g
		case TypeGroupTombstone:
		}
	}
	for _, v := range r.latest {
		if v.Type != TypeTxnMark {
			continue
		}
		if g, ok := out.Groups[v.Group]; ok && g.Incarnation == v.Incarnation {
			g.TxnMarks[v.TransactionalID] = group.TxnMark{ProducerID: v.ProducerID, Epoch: v.Epoch,
				Partitions: group.SortTPs(slices.Clone(v.Partitions)), Marked: time.UnixMilli(v.MarkedMs)}
			out.TxnMarks++
		} else {
			out.Orphans++
		}
	}
	for k, v := range r.latest {
		if !isOffsetKey(k) {
			continue
		}
		g, ok := out.Groups[v.Group]
		if v.Type == TypeOffsetTombstone {
			continue
		}
		if !ok || g.Incarnation != v.Incarnation {
			out.Orphans++
			continue
		}
		g.SetOffset(group.TP{Topic: v.Topic, Partition: v.Partition}, v.Offset)
		out.Offsets++
	}
	return out
}
