package partition

// What an index derived from the log (the stream-version index of
// partitiond/internal/streams) needs from a partition beyond the client API:
// reads that ignore the high watermark, a way to notice that a follower's
// log was cut, and the partition directory for files that must live and
// die with this incarnation of the partition.

// Rewinds counts the truncations and skips replication made to this
// partition's log since it was opened. An index derived from the log
// rebuilds itself when the count changed since it last looked.
func (p *Partition) Rewinds() uint64 { return p.rewinds.Load() }

// ReadLog returns records from offset from up to the durable end, whatever
// the high watermark: an index derived from the log must see everything
// the log holds, committed or not. It fails like Fetch for a partition
// that is gone.
func (p *Partition) ReadLog(from uint64, maxRecords, maxBytes int) (records []byte, count int, next uint64, err error) {
	if err := p.checkGone(); err != nil {
		return nil, 0, from, err
	}
	r, err := p.log.Read(from, maxRecords, maxBytes, p.log.EndOffset())
	if err != nil {
		return nil, 0, from, p.storageErr(err)
	}
	return r.Records, r.Count, r.Next, nil
}

// Dir is the directory of this incarnation of the partition: files kept
// there are removed with the partition (delete, truncate under a new
// lifecycle epoch). The log ignores names it does not know.
func (p *Partition) Dir() string { return p.node.fs.Join(p.node.logsDir, p.meta.Load().Dir) }

// CheckGone fails when the partition was deleted, replaced or closed.
func (p *Partition) CheckGone() error { return p.checkGone() }
