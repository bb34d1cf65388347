package load

import (
	"math"
	"math/bits"
	"time"
)

// subBits sets the histogram precision: each power-of-two range of values is
// split into 2^(subBits-1) linear sub-buckets, so a recorded value is known
// to within 1/64 (about 1.6%), the HdrHistogram idea with two significant
// digits, in 64 KiB and without a dependency.
const (
	subBits  = 7
	subCount = 1 << subBits // 128
	subHalf  = subCount / 2 // 64
)

// Histogram records durations (nanoseconds) in log-linear buckets. It is not
// safe for concurrent use: each worker keeps its own and Merge combines them.
type Histogram struct {
	counts   [64][subCount]uint64
	total    uint64
	min, max int64
	sum      float64
}

// bucket maps v >= 0 to its (exponent, sub-bucket). Values below 128 are
// exact (exponent 0); above, the top 7 significant bits select the bucket.
func bucket(v int64) (int, int) {
	u := uint64(v)
	if u < subCount {
		return 0, int(u)
	}
	e := bits.Len64(u) - subBits
	return e, int(u >> uint(e))
}

// upper is the highest value that maps to bucket (e, s), what a percentile
// reports (as HdrHistogram reports the highest equivalent value).
func upper(e, s int) int64 {
	if e == 0 {
		return int64(s)
	}
	return int64((uint64(s)+1)<<uint(e)) - 1
}

// Record adds one value.
func (h *Histogram) Record(d time.Duration) {
	v := int64(d)
	if v < 0 {
		v = 0
	}
	e, s := bucket(v)
	h.counts[e][s]++
	if h.total == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.total++
	h.sum += float64(v)
}

// Merge adds o's values to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.total == 0 {
		return
	}
	for e := range o.counts {
		for s, c := range o.counts[e] {
			h.counts[e][s] += c
		}
	}
	if h.total == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.total += o.total
	h.sum += o.sum
}

// Count returns the number of values.
func (h *Histogram) Count() uint64 { return h.total }

// Quantile returns the value at quantile q (0..1), capped at the maximum seen.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	target := uint64(math.Ceil(q * float64(h.total)))
	target = max(target, 1)
	var seen uint64
	for e := range h.counts {
		start := 0
		if e > 0 {
			start = subHalf
		}
		for s := start; s < subCount; s++ {
			seen += h.counts[e][s]
			if seen >= target {
				return time.Duration(min(upper(e, s), h.max))
			}
		}
	}
	return time.Duration(h.max)
}

// Max returns the largest value; Min the smallest; Mean the average.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Min returns the smallest value.
func (h *Histogram) Min() time.Duration { return time.Duration(h.min) }

// Mean returns the average value.
func (h *Histogram) Mean() time.Duration {
	if h.total == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.total))
}
