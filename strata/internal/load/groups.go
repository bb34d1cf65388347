package load

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// The groups mode: every connection is the only member of its own group
// (so it holds every partition of the topic) and runs the weighted Mix of
// COMMIT_OFFSET, BATCH_COMMIT, HEARTBEAT and FETCH_OFFSET one request at a
// time, so each latency is one request's round trip. Offsets only rise:
// every commit of a partition is one above the last acknowledged one, so
// each is a real (durable) write on the server. After the timed loop every
// FETCH_OFFSET answer and a final read-back of every committed partition
// are compared with the last acknowledged commit, then each member leaves
// and runs Rejoins JOIN+SYNC+LEAVE cycles for the membership figures.

// Commands of the groups report, in report order.
const (
	gcCommit = iota
	gcBatch
	gcHeartbeat
	gcFetch
	gcJoin
	gcSync
	gcLeave
	gcCycle
	gcCount
)

var gcNames = [gcCount]string{"COMMIT_OFFSET", "BATCH_COMMIT", "HEARTBEAT", "FETCH_OFFSET",
	"JOIN_GROUP", "SYNC_GROUP", "LEAVE_GROUP", "JOIN+SYNC+LEAVE"}

// maxFirstErrors bounds the error texts kept per command.
const maxFirstErrors = 3

// Mix weighs the commands of the groups loop; 0 leaves one out.
type Mix struct {
	Commit, Batch, Heartbeat, Fetch int
}

// DefaultMix is equal parts of the four commands.
var DefaultMix = Mix{Commit: 1, Batch: 1, Heartbeat: 1, Fetch: 1}

// ParseMix parses "commit=1,batch=1,heartbeat=1,fetch=1"; unlisted commands
// get weight 0. At least one weight must be positive.
func ParseMix(s string) (Mix, error) {
	var m Mix
	for item := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(item), "=")
		n, err := strconv.Atoi(v)
		if !ok || err != nil || n < 0 {
			return Mix{}, fmt.Errorf("--mix: %q is not <command>=<weight> with a weight >= 0", item)
		}
		switch k {
		case "commit":
			m.Commit = n
		case "batch":
			m.Batch = n
		case "heartbeat":
			m.Heartbeat = n
		case "fetch":
			m.Fetch = n
		default:
			return Mix{}, fmt.Errorf("--mix: unknown command %q (commit, batch, heartbeat, fetch)", k)
		}
	}
	if m == (Mix{}) {
		return Mix{}, fmt.Errorf("--mix: every weight is 0")
	}
	return m, nil
}

func (m Mix) String() string {
	return fmt.Sprintf("commit=%d,batch=%d,heartbeat=%d,fetch=%d", m.Commit, m.Batch, m.Heartbeat, m.Fetch)
}

// weights returns the mix as weights indexed by command.
func (m Mix) weights() [gcCount]int {
	var w [gcCount]int
	w[gcCommit], w[gcBatch], w[gcHeartbeat], w[gcFetch] = m.Commit, m.Batch, m.Heartbeat, m.Fetch
	return w
}

// sequence is one round of the loop: each command repeated by its weight.
func (m Mix) sequence() []int {
	var seq []int
	for cmd, n := range m.weights() {
		for range n {
			seq = append(seq, cmd)
		}
	}
	return seq
}

func (c *Config) checkGroups() error {
	if c.BatchEntries > wire.MaxOffsetEntries {
		return errcode.InvalidParameter.New("batch-entries is at most 1024", "param", "batch-entries",
			"value", strconv.Itoa(c.BatchEntries))
	}
	w := c.Mix.weights()
	if slices.Min(w[:]) < 0 {
		return errcode.InvalidParameter.New("mix weights must be >= 0", "param", "mix", "value", c.Mix.String())
	}
	return nil
}

// Command is one command's figures in the groups report. Count is the
// successful requests; OpsPerSec is Count over Seconds, the phase the
// command ran in (the timed loop, or the membership phase for JOIN_GROUP,
// SYNC_GROUP, LEAVE_GROUP and the JOIN+SYNC+LEAVE cycle).
type Command struct {
	Name        string   `json:"command"`
	Count       int64    `json:"count"`
	Seconds     float64  `json:"seconds"`
	OpsPerSec   float64  `json:"ops_per_sec"`
	Errors      int64    `json:"errors"`
	FirstErrors []string `json:"first_errors,omitempty"`
	Latency     Latency  `json:"latency"`
}

// GroupsReport is the groups mode's part of Result.
type GroupsReport struct {
	Partitions   int      `json:"partitions"`
	BatchEntries int      `json:"batch_entries"`
	Mix          string   `json:"mix"`
	Groups       []string `json:"groups"`
	// Seconds is the timed loop; MembershipSeconds the LEAVE and
	// JOIN+SYNC+LEAVE phase after it.
	Seconds           float64 `json:"seconds"`
	MembershipSeconds float64 `json:"membership_seconds"`
	// LoopRequests is the acknowledged requests of the timed loop (every
	// command of the mix), LoopOpsPerSec that over Seconds.
	LoopRequests  int64     `json:"loop_requests"`
	LoopOpsPerSec float64   `json:"loop_ops_per_sec"`
	Commands      []Command `json:"commands"`
	// BatchCommitEntries is the entries of acknowledged BATCH_COMMITs,
	// BatchCommitEntriesPerSec that over Seconds: the commit throughput.
	BatchCommitEntries       int64   `json:"batch_commit_entries"`
	BatchCommitEntriesPerSec float64 `json:"batch_commit_entries_per_sec"`
	// Rejoins counts JOIN+SYNC after a fencing error (GEN_MISMATCH,
	// member_not_found, ...) in the loop.
	Rejoins int64 `json:"rejoins"`
	// OffsetsChecked counts committed offsets compared with the last
	// acknowledged commit (FETCH_OFFSET answers of the loop and the final
	// read-back of every committed partition); OffsetMismatches those that
	// differed.
	OffsetsChecked   int64  `json:"offsets_checked"`
	OffsetMismatches int64  `json:"offset_mismatches"`
	FirstMismatch    string `json:"first_mismatch,omitempty"`
	// Cleanup holds failures to delete the run's groups afterwards.
	Cleanup []string `json:"cleanup_errors,omitempty"`
}

// Command returns the figures of the named command, or nil.
func (g *GroupsReport) Command(name string) *Command {
	for i := range g.Commands {
		if g.Commands[i].Name == name {
			return &g.Commands[i]
		}
	}
	return nil
}

// groupStats collects the members' figures.
type groupStats struct {
	mu        sync.Mutex
	hist      [gcCount]Histogram
	count     [gcCount]int64
	errs      [gcCount]int64
	firstErrs [gcCount][]string
	entries   int64
	rejoins   int64
	checked   int64
	mismatch  int64
	firstMis  string
}

func (s *groupStats) fail(cmd int, err error) {
	s.mu.Lock()
	s.errs[cmd]++
	if len(s.firstErrs[cmd]) < maxFirstErrors {
		s.firstErrs[cmd] = append(s.firstErrs[cmd], err.Error())
	}
	s.mu.Unlock()
}

// member is one connection's group member and its local figures.
type member struct {
	c            *client.Client
	topic, group string
	base, id     string // requested and actual member id
	gen          int64
	parts        []int32
	// off is the last acknowledged commit per partition; unsure marks
	// partitions whose last commit failed (it may have been applied as
	// off+1).
	off    map[int32]uint64
	unsure map[int32]bool
	// next partition of COMMIT_OFFSET and FETCH_OFFSET, start of the
	// BATCH_COMMIT window.
	ci, fi, bi int
	entries    []wire.PartitionOffset
	st         *groupStats

	hist              [gcCount]Histogram
	count             [gcCount]int64
	batched, rejoins  int64
	checked, mismatch int64
	firstMis          string
}

func (m *member) merge() {
	s := m.st
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range gcCount {
		s.hist[i].Merge(&m.hist[i])
		s.count[i] += m.count[i]
	}
	s.entries += m.batched
	s.rejoins += m.rejoins
	s.checked += m.checked
	s.mismatch += m.mismatch
	if s.firstMis == "" {
		s.firstMis = m.firstMis
	}
	m.hist = [gcCount]Histogram{}
	m.count = [gcCount]int64{}
	m.batched, m.rejoins, m.checked, m.mismatch = 0, 0, 0, 0
}

// record adds a successful request of cmd that started at start.
func (m *member) record(cmd int, start time.Time) {
	m.hist[cmd].Record(time.Since(start))
	m.count[cmd]++
}

// check compares a committed offset read back with the expected one.
func (m *member) check(p int32, got uint64) {
	m.checked++
	want := m.off[p]
	switch {
	case got == want:
		delete(m.unsure, p)
	case m.unsure[p] && got == want+1:
		// The failed commit was applied after all.
		m.off[p] = got
		delete(m.unsure, p)
	default:
		m.mismatch++
		if m.firstMis == "" {
			m.firstMis = fmt.Sprintf("group %s partition %d: FETCH_OFFSET %d, last commit %d", m.group, p, got, want)
		}
	}
}

// join runs JOIN_GROUP (resuming the current member id, or afresh with
// the base id when that is gone) and SYNC_GROUP. Failures are counted;
// latencies are recorded when timed.
func (m *member) join(ctx context.Context, timed bool) error {
	id := m.id
	if id == "" {
		id = m.base
	}
	start := time.Now()
	jr, err := m.c.JoinGroup(ctx, m.group, id, m.topic)
	if err != nil && client.MustRejoin(err) && id != m.base {
		start = time.Now()
		jr, err = m.c.JoinGroup(ctx, m.group, m.base, m.topic)
	}
	if err != nil {
		m.st.fail(gcJoin, err)
		return err
	}
	if timed {
		m.record(gcJoin, start)
	}
	m.id = jr.Member
	start = time.Now()
	parts, err := m.c.SyncGroup(ctx, m.group, jr.Member, jr.Generation, m.topic)
	if err != nil {
		m.st.fail(gcSync, err)
		return err
	}
	if timed {
		m.record(gcSync, start)
	}
	if len(parts) == 0 {
		err := errcode.Internal.New("the group's only member holds no partition", "group", m.group, "member", m.id)
		m.st.fail(gcSync, err)
		return err
	}
	slices.Sort(parts)
	m.gen, m.parts = jr.Generation, parts
	return nil
}

// leave sends LEAVE_GROUP for the current member.
func (m *member) leave(ctx context.Context, timed bool) error {
	start := time.Now()
	err := m.c.LeaveGroup(ctx, m.topic, m.group, m.id)
	if err != nil {
		m.st.fail(gcLeave, err)
		return err
	}
	if timed {
		m.record(gcLeave, start)
	}
	m.id = ""
	return nil
}

// do sends one request of cmd.
func (m *member) do(ctx context.Context, cmd, batchEntries int) error {
	switch cmd {
	case gcCommit:
		p := m.parts[m.ci%len(m.parts)]
		m.ci++
		next := m.off[p] + 1
		if err := m.c.CommitOffset(ctx, m.topic, p, m.group, next, m.id, m.gen); err != nil {
			m.unsure[p] = true
			return err
		}
		m.off[p] = next
		delete(m.unsure, p)
	case gcBatch:
		n := min(batchEntries, len(m.parts))
		m.entries = m.entries[:0]
		for i := range n {
			p := m.parts[(m.bi+i)%len(m.parts)]
			m.entries = append(m.entries, wire.PartitionOffset{Partition: p, Offset: m.off[p] + 1})
		}
		m.bi = (m.bi + n) % len(m.parts)
		got, err := m.c.BatchCommit(ctx, m.topic, m.group, m.id, m.gen, m.entries)
		if err == nil && got != n {
			err = errcode.Internal.New(fmt.Sprintf("BATCH_COMMIT applied %d of %d entries", got, n))
		}
		if err != nil {
			for _, e := range m.entries {
				m.unsure[e.Partition] = true
			}
			return err
		}
		for _, e := range m.entries {
			m.off[e.Partition] = e.Offset
			delete(m.unsure, e.Partition)
		}
		m.batched += int64(n)
	case gcHeartbeat:
		_, err := m.c.Heartbeat(ctx, m.topic, m.group, m.id, m.gen)
		return err
	case gcFetch:
		p := m.parts[m.fi%len(m.parts)]
		m.fi++
		off, err := m.c.FetchOffset(ctx, m.topic, p, m.group)
		if err != nil {
			return err
		}
		m.check(p, off)
	}
	return nil
}

// loop runs the mix until ctx ends or the shared count is reached; each
// request runs under callCtx so one in flight at the end completes.
func (m *member) loop(ctx, callCtx context.Context, cfg Config, seq []int, issued *atomic.Int64) {
	for i := 0; ctx.Err() == nil; i++ {
		if cfg.Count > 0 && issued.Add(1) > cfg.Count {
			return
		}
		cmd := seq[i%len(seq)]
		start := time.Now()
		err := m.do(callCtx, cmd, cfg.BatchEntries)
		if err == nil {
			m.record(cmd, start)
			continue
		}
		if callCtx.Err() != nil {
			return
		}
		m.st.fail(cmd, err)
		switch {
		case client.MustRejoin(err):
			if c := errcode.CodeOf(err); c == errcode.MemberNotFound.Name() || c == errcode.GroupNotFound.Name() {
				m.id = "" // gone: join afresh with the base id
			}
			if !m.rejoin(ctx, callCtx) {
				return
			}
		case errcode.IsRetryable(err):
			pause(ctx, 20*time.Millisecond)
		default:
			return
		}
	}
}

// rejoin joins again after a fencing error, retrying retryable failures
// until ctx ends.
func (m *member) rejoin(ctx, callCtx context.Context) bool {
	m.rejoins++
	for ctx.Err() == nil {
		err := m.join(callCtx, false)
		if err == nil {
			return true
		}
		if !errcode.IsRetryable(err) && !client.MustRejoin(err) {
			return false
		}
		pause(ctx, 20*time.Millisecond)
	}
	return false
}

// readBack compares the committed offset of every partition of the member
// with the last acknowledged commit (FETCH_OFFSET, not timed).
func (m *member) readBack(ctx context.Context) {
	for _, p := range m.parts {
		off, err := m.c.FetchOffset(ctx, m.topic, p, m.group)
		if err != nil {
			m.st.fail(gcFetch, err)
			return
		}
		m.check(p, off)
	}
}

// membership leaves, then runs rejoins JOIN+SYNC+LEAVE cycles.
func (m *member) membership(ctx context.Context, rejoins int) {
	if m.id != "" {
		_ = m.leave(ctx, true)
	}
	for range rejoins {
		if ctx.Err() != nil {
			return
		}
		start := time.Now()
		m.id = ""
		err := m.join(ctx, true)
		if m.id != "" {
			if lerr := m.leave(ctx, true); err == nil {
				err = lerr
			}
		}
		if err == nil {
			m.record(gcCycle, start)
		}
	}
}

func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// groupsTopic returns the partition count of the topic, creating it with
// max(Partitions, BatchEntries) partitions when missing. BATCH_COMMIT needs
// one partition per entry, so an existing topic with fewer is refused.
func groupsTopic(ctx context.Context, cfg Config, c *client.Client) (int, error) {
	need := 1
	if cfg.Mix.Batch > 0 {
		need = cfg.BatchEntries
	}
	md, err := c.Metadata(ctx, cfg.Topic)
	if err != nil && errcode.CodeOf(err) != errcode.TopicNotFound.Name() {
		return 0, err
	}
	if err != nil {
		if _, err := c.CreateTopic(ctx, client.TopicConfig{Name: cfg.Topic, Partitions: max(cfg.Partitions, need)}); err != nil {
			return 0, err
		}
		if err := retrySetup(ctx, func() (err error) {
			md, err = c.Metadata(ctx, cfg.Topic)
			return err
		}); err != nil {
			return 0, err
		}
	}
	if md.Partitions < need {
		return 0, fmt.Errorf("topic %q has %d partitions, fewer than --batch-entries %d: a BATCH_COMMIT of %d unique "+
			"partitions needs at least that many (use another --topic, a smaller --batch-entries, or --mix without batch)",
			cfg.Topic, md.Partitions, cfg.BatchEntries, cfg.BatchEntries)
	}
	return md.Partitions, nil
}

// runGroups is Run for ModeGroups.
func runGroups(ctx context.Context, cfg Config, clients []*client.Client) (*Result, error) {
	parts, err := groupsTopic(ctx, cfg, clients[0])
	if err != nil {
		return nil, err
	}
	st := &groupStats{}
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	members := make([]*member, len(clients))
	rep := &GroupsReport{Partitions: parts, BatchEntries: cfg.BatchEntries, Mix: cfg.Mix.String()}
	for i, c := range clients {
		members[i] = &member{c: c, topic: cfg.Topic, group: fmt.Sprintf("strata-bench-g%d-%s", i, suffix),
			base: fmt.Sprintf("bench-%d", i), off: map[int32]uint64{}, unsure: map[int32]bool{}, st: st}
		rep.Groups = append(rep.Groups, members[i].group)
	}
	// Whatever happens, members still in their group leave and the run's
	// groups are deleted (bounded, even when ctx was cancelled), so runs
	// leave no groups behind.
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		for _, m := range members {
			if m.id != "" {
				_ = m.c.LeaveGroup(cctx, m.topic, m.group, m.id)
			}
			if cfg.KeepGroups {
				continue
			}
			if err := m.c.DeleteGroup(cctx, m.group); err != nil && errcode.CodeOf(err) != errcode.GroupNotFound.Name() {
				rep.Cleanup = append(rep.Cleanup, fmt.Sprintf("delete group %s: %v", m.group, err))
			}
		}
	}()
	// A just-created topic may not be in the coordinator's view yet
	// (topic_not_found from JOIN_GROUP): retry that too.
	for _, m := range members {
		err := retryWhile(ctx, func() error { return m.join(ctx, false) }, func(err error) bool {
			return errcode.IsRetryable(err) || errcode.CodeOf(err) == errcode.TopicNotFound.Name()
		})
		if err != nil {
			return nil, fmt.Errorf("setup of group %s: %w", m.group, err)
		}
	}
	// Setup retries are not figures.
	st.errs, st.firstErrs = [gcCount]int64{}, [gcCount][]string{}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if cfg.Duration > 0 {
		runCtx, cancel = context.WithTimeout(runCtx, cfg.Duration)
		defer cancel()
	}
	seq := cfg.Mix.sequence()
	var issued atomic.Int64
	start := time.Now()
	each(members, func(m *member) { m.loop(runCtx, ctx, cfg, seq, &issued) })
	rep.Seconds = time.Since(start).Seconds()
	if ctx.Err() == nil { // not interrupted
		each(members, func(m *member) { m.readBack(ctx) })
		start = time.Now()
		each(members, func(m *member) { m.membership(ctx, cfg.Rejoins) })
		rep.MembershipSeconds = time.Since(start).Seconds()
	}
	for _, m := range members {
		m.merge()
	}

	w := cfg.Mix.weights()
	for cmd := range gcCount {
		secs := rep.Seconds
		if cmd >= gcJoin {
			secs = rep.MembershipSeconds
		}
		if w[cmd] == 0 && st.count[cmd] == 0 && st.errs[cmd] == 0 {
			continue
		}
		c := Command{Name: gcNames[cmd], Count: st.count[cmd], Seconds: secs, Errors: st.errs[cmd],
			FirstErrors: st.firstErrs[cmd], Latency: summarize(&st.hist[cmd])}
		if secs > 0 {
			c.OpsPerSec = float64(c.Count) / secs
		}
		if cmd < gcJoin {
			rep.LoopRequests += c.Count
		}
		rep.Commands = append(rep.Commands, c)
	}
	if rep.Seconds > 0 {
		rep.LoopOpsPerSec = float64(rep.LoopRequests) / rep.Seconds
	}
	rep.BatchCommitEntries = st.entries
	if rep.Seconds > 0 {
		rep.BatchCommitEntriesPerSec = float64(st.entries) / rep.Seconds
	}
	rep.Rejoins, rep.OffsetsChecked, rep.OffsetMismatches, rep.FirstMismatch = st.rejoins, st.checked, st.mismatch, st.firstMis
	return &Result{Mode: cfg.Mode, Addr: cfg.Addr, Topic: cfg.Topic, Conns: cfg.Conns,
		Compression: clients[0].Compression().String(), Groups: rep}, nil
}

// each runs f for every member concurrently and waits.
func each(members []*member, f func(*member)) {
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Go(func() { f(m) })
	}
	wg.Wait()
}

func writeGroupsText(w io.Writer, r *Result) {
	g := r.Groups
	fmt.Fprintf(w, "strata bench groups: addr=%s topic=%s partitions=%d connections=%d batch-entries=%d mix=%s compression=%s\n",
		r.Addr, r.Topic, g.Partitions, r.Conns, g.BatchEntries, g.Mix, r.Compression)
	fmt.Fprintf(w, "timed loop: %d requests in %.2fs, %.1f requests/s (one at a time per connection); membership phase %.2fs (LEAVE, then JOIN+SYNC+LEAVE cycles)\n",
		g.LoopRequests, g.Seconds, g.LoopOpsPerSec, g.MembershipSeconds)
	fmt.Fprintf(w, "%-16s %9s %10s %7s %9s %9s %9s %9s %9s\n", "command", "count", "ops/s", "errors",
		"p50 ms", "p99 ms", "p999 ms", "max ms", "mean ms")
	for _, c := range g.Commands {
		l := c.Latency
		fmt.Fprintf(w, "%-16s %9d %10.1f %7d %9.3f %9.3f %9.3f %9.3f %9.3f\n", c.Name, c.Count, c.OpsPerSec, c.Errors,
			l.P50, l.P99, l.P999, l.Max, l.Mean)
	}
	if g.Command(gcNames[gcBatch]) != nil {
		fmt.Fprintf(w, "batch-commit entries/s: %.0f (%d entries in %.2fs)\n", g.BatchCommitEntriesPerSec, g.BatchCommitEntries, g.Seconds)
	}
	fmt.Fprintf(w, "committed offsets read back: %d compared, %d mismatches; rejoins after fencing errors: %d\n",
		g.OffsetsChecked, g.OffsetMismatches, g.Rejoins)
	if g.FirstMismatch != "" {
		fmt.Fprintf(w, "first mismatch: %s\n", g.FirstMismatch)
	}
	for _, c := range g.Commands {
		for _, e := range c.FirstErrors {
			fmt.Fprintf(w, "%s error: %s\n", c.Name, e)
		}
	}
	for _, e := range g.Cleanup {
		fmt.Fprintf(w, "cleanup: %s\n", e)
	}
}
