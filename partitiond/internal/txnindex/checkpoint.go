package txnindex

import (
	"bytes"
	"encoding/json"
	"io"
	"sort"

	"github.com/strataio/strata/libs/errcode"
)

// The checkpoint of an index: what a scan of the log below the covered
// offset builds (open transactions, ended epochs, coordinator epochs,
// aborted ranges, decided transactions still bounding the LSO), so a
// partition that opens scans only the log after it. Registrations are
// not in it: they are the leader's memory, as after a full scan.

const checkpointVersion = 1

type ckptProducer struct {
	ID         string `json:"id"`
	Open       bool   `json:"open,omitempty"`
	OpenEpoch  int64  `json:"open_epoch,omitempty"`
	First      uint64 `json:"first,omitempty"`
	Ended      bool   `json:"ended,omitempty"`
	EndedEpoch int64  `json:"ended_epoch,omitempty"`
	CoordEpoch int64  `json:"coord_epoch,omitempty"`
}

type ckptAborted struct {
	Producer string `json:"producer"`
	Epoch    int64  `json:"epoch"`
	First    uint64 `json:"first"`
	Last     uint64 `json:"last"`
}

type ckptDone struct {
	First  uint64 `json:"first"`
	Marker uint64 `json:"marker"`
}

type checkpoint struct {
	V         int            `json:"v"`
	Producers []ckptProducer `json:"producers"`
	Aborted   []ckptAborted  `json:"aborted"`
	Done      []ckptDone     `json:"done"`
}

// Encode returns the index's checkpoint (producers and ranges in a fixed
// order, so equal indexes encode equally). The caller holds the lock that
// orders the index's mutations with the log (the partition's append lock)
// and records which log offset the checkpoint covers.
func (x *Index) Encode() []byte {
	x.mu.RLock()
	defer x.mu.RUnlock()
	c := checkpoint{V: checkpointVersion, Producers: []ckptProducer{}, Aborted: []ckptAborted{}, Done: []ckptDone{}}
	for id, p := range x.producers {
		if !p.open && !p.ended && p.coordEpoch == 0 {
			continue // only a registration: not log state
		}
		cp := ckptProducer{ID: id, Open: p.open, Ended: p.ended, CoordEpoch: p.coordEpoch}
		if p.open { // the fields are read only while the state holds
			cp.OpenEpoch, cp.First = p.openEpoch, p.first
		}
		if p.ended {
			cp.EndedEpoch = p.endedEpoch
		}
		c.Producers = append(c.Producers, cp)
	}
	sort.Slice(c.Producers, func(i, j int) bool { return c.Producers[i].ID < c.Producers[j].ID })
	ids := make([]string, 0, len(x.aborted))
	for id := range x.aborted {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		for _, r := range x.aborted[id] {
			c.Aborted = append(c.Aborted, ckptAborted{Producer: id, Epoch: r.Epoch, First: r.First, Last: r.Last})
		}
	}
	for _, d := range x.done {
		c.Done = append(c.Done, ckptDone{First: d.first, Marker: d.marker})
	}
	b, err := json.Marshal(c)
	if err != nil {
		panic(err) // plain structs: cannot fail
	}
	return b
}

func malformed(why string) error {
	return errcode.MalformedInput.New("transaction index checkpoint: "+why, "payload", "txn_checkpoint")
}

// Decode rebuilds an index from Encode's output. It refuses unknown fields,
// trailing data, another version, repeated or unsorted producers, ranges
// that are empty, unsorted or overlapping per producer, and decided
// transactions whose marker precedes their first offset (malformed_input).
func Decode(b []byte) (*Index, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var c checkpoint
	if err := dec.Decode(&c); err != nil {
		return nil, malformed(err.Error())
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, malformed("trailing data")
	}
	if c.V != checkpointVersion {
		return nil, malformed("unknown version")
	}
	x := New()
	for i, p := range c.Producers {
		if p.ID == "" || i > 0 && c.Producers[i-1].ID >= p.ID {
			return nil, malformed("producers empty, repeated or unsorted")
		}
		if !p.Open && (p.OpenEpoch != 0 || p.First != 0) || !p.Ended && p.EndedEpoch != 0 {
			return nil, malformed("epoch of a state not held")
		}
		x.producers[p.ID] = &producer{open: p.Open, openEpoch: p.OpenEpoch, first: p.First, ended: p.Ended,
			endedEpoch: p.EndedEpoch, coordEpoch: p.CoordEpoch}
		if p.Open {
			x.nOpen++
		}
	}
	for i, r := range c.Aborted {
		if r.Producer == "" || r.First > r.Last {
			return nil, malformed("aborted range without producer or empty")
		}
		if i > 0 {
			prev := c.Aborted[i-1]
			if prev.Producer > r.Producer || prev.Producer == r.Producer && prev.Last >= r.First {
				return nil, malformed("aborted ranges unsorted or overlapping")
			}
		}
		x.aborted[r.Producer] = append(x.aborted[r.Producer], Range{Epoch: r.Epoch, First: r.First, Last: r.Last})
	}
	for _, d := range c.Done {
		if d.Marker < d.First {
			return nil, malformed("decided transaction's marker before its first offset")
		}
		x.done = append(x.done, completing{first: d.First, marker: d.Marker})
	}
	return x, nil
}
