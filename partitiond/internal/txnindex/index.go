// Package txnindex is one partition's transaction state (SERVICE-SPEC 3.2,
// 4.7; docs/transactions.md): which producer epochs the coordinator added
// (KIP-890), which transactions are open and where they start, the last
// stable offset (LSO), and the aborted-transaction index that lets a
// read_committed fetch skip aborted batches without rescanning the log.
//
// The index is derived state: the log is the truth. It is fed every
// transactional batch and every marker in log order (leader appends,
// replicated batches, and the scan that rebuilds it when a partition opens
// or a follower's log is cut). Registrations (Add) are the only part not in
// the log: they live in the leader's memory, and a new leader answers
// transaction_partition_not_added until the coordinator adds the partition
// again, which it does before retrying.
//
// Index methods are safe for concurrent use: mutations come under the
// partition's append lock, reads (LSO, Aborted) from fetches; the index's own
// lock is a leaf (partitiond/LOCKS.md).
package txnindex

import (
	"sort"
	"strconv"
	"sync"

	"github.com/strataio/strata/libs/errcode"
)

// Range is one aborted transaction: the producer epoch's records lie in
// [First, Last], Last being the abort marker's offset.
type Range struct {
	Epoch       int64
	First, Last uint64
}

// Open describes one transaction with records and no marker yet.
type Open struct {
	ProducerID string
	Epoch      int64
	First      uint64
}

type producer struct {
	// open: the epoch has records and no marker; first is its first offset.
	open      bool
	openEpoch int64
	first     uint64
	// added: the coordinator registered addedEpoch for this partition.
	added      bool
	addedEpoch int64
	// ended: endedEpoch is the highest epoch a marker ended; anything at or
	// below it is stale.
	ended      bool
	endedEpoch int64
	// coordEpoch is the highest coordinator epoch seen for the producer.
	coordEpoch int64
}

// completing is a transaction whose marker is written but not yet below the
// high watermark: it still bounds the LSO, so read_committed never exposes a
// decision a leader change could lose.
type completing struct {
	first, marker uint64
}

// Index is the transaction state of one partition.
type Index struct {
	mu        sync.RWMutex
	producers map[string]*producer
	aborted   map[string][]Range // per producer, ordered by First
	done      []completing
	nOpen     int
}

// New returns an empty index.
func New() *Index {
	return &Index{producers: map[string]*producer{}, aborted: map[string][]Range{}}
}

func (x *Index) get(pid string) *producer {
	p := x.producers[pid]
	if p == nil {
		p = &producer{}
		x.producers[pid] = p
	}
	return p
}

func stale(pid string, ended, got int64) error {
	return errcode.StaleProducerEpoch.New("producer epoch already ended a transaction on this partition",
		"producer", pid, "current", strconv.FormatInt(ended, 10), "got", strconv.FormatInt(got, 10))
}

func fencedCoordinator(pid string, cur, got int64) error {
	return errcode.ProducerFenced.New("request from an older transaction coordinator epoch",
		"producer", pid, "coordinator_epoch", strconv.FormatInt(cur, 10), "got", strconv.FormatInt(got, 10))
}

// Add registers (pid, epoch) as a transaction that may write here. It is
// refused for an epoch at or below the last ended one (stale_producer_epoch),
// from an older coordinator epoch (producer_fenced), and while an older
// epoch still has an open transaction here (transaction_still_open). A
// repeat is a no-op.
func (x *Index) Add(pid string, epoch, coordEpoch int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	p := x.get(pid)
	if p.ended && epoch <= p.endedEpoch {
		return stale(pid, p.endedEpoch, epoch)
	}
	if coordEpoch < p.coordEpoch {
		return fencedCoordinator(pid, p.coordEpoch, coordEpoch)
	}
	if p.open && p.openEpoch != epoch {
		if p.openEpoch > epoch {
			return stale(pid, p.openEpoch, epoch)
		}
		return errcode.TransactionStillOpen.New("an older epoch of the producer still has an open transaction on this partition",
			"producer", pid, "open_epoch", strconv.FormatInt(p.openEpoch, 10), "got", strconv.FormatInt(epoch, 10))
	}
	if p.added && p.addedEpoch > epoch {
		return stale(pid, p.addedEpoch, epoch)
	}
	p.added, p.addedEpoch, p.coordEpoch = true, epoch, coordEpoch
	return nil
}

// CheckAppend says whether a transactional write of (pid, epoch) may be
// appended now: the epoch is added or already open here (KIP-890).
func (x *Index) CheckAppend(pid string, epoch int64) error {
	x.mu.RLock()
	defer x.mu.RUnlock()
	p := x.producers[pid]
	switch {
	case p == nil:
	case p.ended && epoch <= p.endedEpoch:
		return stale(pid, p.endedEpoch, epoch)
	case p.open && p.openEpoch == epoch, p.added && p.addedEpoch == epoch:
		return nil
	case p.open && p.openEpoch > epoch, p.added && p.addedEpoch > epoch:
		return stale(pid, max(p.openEpoch, p.addedEpoch), epoch)
	}
	return errcode.TransactionPartitionNotAdded.New("the transaction coordinator has not added this partition to the producer epoch's transaction",
		"producer", pid, "epoch", strconv.FormatInt(epoch, 10))
}

// CheckMarker says whether a marker for (pid, epoch) from coordinator epoch
// coordEpoch is to be written: duplicate is true when a marker already ended
// that epoch (the repeat writes nothing); an older epoch is stale, an older
// coordinator epoch fenced.
func (x *Index) CheckMarker(pid string, epoch, coordEpoch int64) (duplicate bool, err error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	p := x.producers[pid]
	if p == nil {
		return false, nil
	}
	if p.ended && epoch <= p.endedEpoch {
		if epoch == p.endedEpoch {
			return true, nil
		}
		return false, stale(pid, p.endedEpoch, epoch)
	}
	if coordEpoch < p.coordEpoch {
		return false, fencedCoordinator(pid, p.coordEpoch, coordEpoch)
	}
	if p.open && p.openEpoch > epoch {
		return false, stale(pid, p.openEpoch, epoch)
	}
	return false, nil
}

// Appended records a transactional batch of (pid, epoch) at base: the first
// one opens the transaction.
func (x *Index) Appended(pid string, epoch int64, base uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	p := x.get(pid)
	if p.open {
		return
	}
	p.open, p.openEpoch, p.first = true, epoch, base
	x.nOpen++
}

// Marker records a marker of (pid, epoch) at offset off. It ends the open
// transaction (an abort adds its range to the aborted index), drops the
// registration and makes the epoch and everything below it stale.
func (x *Index) Marker(pid string, epoch, coordEpoch int64, commit bool, off uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	p := x.get(pid)
	if p.open {
		if !commit {
			x.aborted[pid] = append(x.aborted[pid], Range{Epoch: p.openEpoch, First: p.first, Last: off})
		}
		x.done = append(x.done, completing{first: p.first, marker: off})
		p.open = false
		x.nOpen--
	}
	if p.added && p.addedEpoch <= epoch {
		p.added = false
	}
	if !p.ended || epoch > p.endedEpoch {
		p.ended, p.endedEpoch = true, epoch
	}
	p.coordEpoch = max(p.coordEpoch, coordEpoch)
}

// LSO returns the last stable offset for high watermark hwm: the first
// offset of the earliest transaction that is open, or whose marker is not
// yet below hwm; hwm when there is none.
func (x *Index) LSO(hwm uint64) uint64 {
	x.mu.RLock()
	lso, prune := hwm, false
	for _, c := range x.done {
		if c.marker >= hwm {
			lso = min(lso, c.first)
		} else {
			prune = true
		}
	}
	if x.nOpen > 0 {
		for _, p := range x.producers {
			if p.open {
				lso = min(lso, p.first)
			}
		}
	}
	x.mu.RUnlock()
	if prune {
		x.mu.Lock()
		kept := x.done[:0]
		for _, c := range x.done {
			if c.marker >= hwm {
				kept = append(kept, c)
			}
		}
		clear(x.done[len(kept):])
		x.done = kept
		x.mu.Unlock()
	}
	return lso
}

// Aborted reports whether the transactional batch of pid starting at off
// belongs to an aborted transaction: a binary search in the producer's
// aborted ranges.
func (x *Index) Aborted(pid []byte, off uint64) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	rs := x.aborted[string(pid)]
	i := sort.Search(len(rs), func(i int) bool { return rs[i].Last >= off })
	return i < len(rs) && rs[i].First <= off
}

// TrimBelow drops aborted ranges that end below start (retention removed
// their records).
func (x *Index) TrimBelow(start uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for pid, rs := range x.aborted {
		i := sort.Search(len(rs), func(i int) bool { return rs[i].Last >= start })
		switch {
		case i == len(rs):
			delete(x.aborted, pid)
		case i > 0:
			x.aborted[pid] = append([]Range(nil), rs[i:]...)
		}
	}
}

// Reset replaces x's content with y's (y must not be used afterwards): a
// rebuild publishes its result while fetches keep reading x.
func (x *Index) Reset(y *Index) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.producers, x.aborted, x.done, x.nOpen = y.producers, y.aborted, y.done, y.nOpen
}

// OpenTxns lists the open transactions, oldest first.
func (x *Index) OpenTxns() []Open {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var out []Open
	for pid, p := range x.producers {
		if p.open {
			out = append(out, Open{ProducerID: pid, Epoch: p.openEpoch, First: p.first})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].First < out[j].First })
	return out
}

// AbortedRanges returns the producer's aborted ranges (a copy), for tests
// and diagnostics.
func (x *Index) AbortedRanges(pid string) []Range {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return append([]Range(nil), x.aborted[pid]...)
}
