package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
)

// ScanChunk is the read size of the scanner.
const ScanChunk = 1 << 20

// Visit is called for each valid batch found by Scan. batch is the whole
// stored batch and is only valid during the call.
type Visit func(pos int64, h *Header, batch []byte) error

// Scan validates the batches of f from byte pos up to size, in order, and
// calls fn for each valid one. It stops at the first invalid batch and
// returns that position and the problem (OK and end == size when every
// batch is valid). Read errors and fn's errors are returned as err.
func Scan(f io.ReaderAt, pos, size int64, fn Visit) (end int64, prob Problem, err error) {
	buf := make([]byte, 0, max(0, min(int64(ScanChunk), size-pos)))
	var bufPos int64 // file position of buf[0]
	for pos < size {
		// Make sure buf holds at least the fixed header at pos.
		if pos < bufPos || pos+HeaderFixed > bufPos+int64(len(buf)) {
			n := min(int64(ScanChunk), size-pos)
			buf = buf[:n]
			if err := readFull(f, buf, pos); err != nil {
				return pos, OK, err
			}
			bufPos = pos
		}
		rel := pos - bufPos
		h, p := ParseHeader(buf[rel:])
		if p == Short && rel > 0 && bufPos+int64(len(buf)) < size {
			// The header's producer id runs past the buffer (only its fixed
			// part was checked above): read again from the batch, which
			// holds any whole header (ScanChunk > HeaderFixed +
			// MaxProducerIDLen). Short here is not a torn batch.
			n := min(int64(ScanChunk), size-pos)
			buf = buf[:n]
			if err := readFull(f, buf, pos); err != nil {
				return pos, OK, err
			}
			bufPos, rel = pos, 0
			h, p = ParseHeader(buf)
		}
		if p != OK {
			return pos, p, nil
		}
		if pos+int64(h.Length) > size {
			return pos, Short, nil
		}
		var b []byte
		if rel+int64(h.Length) <= int64(len(buf)) {
			b = buf[rel : rel+int64(h.Length)]
		} else {
			b = make([]byte, h.Length)
			if err := readFull(f, b, pos); err != nil {
				return pos, OK, err
			}
		}
		h, _, p = CheckBatch(b)
		if p != OK {
			return pos, p, nil
		}
		if fn != nil {
			if err := fn(pos, &h, b); err != nil {
				return pos, OK, err
			}
		}
		pos += int64(h.Length)
	}
	return pos, OK, nil
}

// FindValid searches f between from and size for whole valid batches that
// do not start at a batch boundary the scanner could reach (the bytes before
// them are damaged): it looks for the magic at every byte position and keeps
// candidates whose length, CRC and record set check out and whose base
// offset is at least minBase. Recovery uses it to tell a torn tail (nothing
// valid after the damage, or only batches written before the damaged one
// was durable) from corruption of durable data.
func FindValid(f io.ReaderAt, from, size int64, minBase uint64) ([]Header, error) {
	var found []Header
	var magic [4]byte
	binary.BigEndian.PutUint32(magic[:], BatchMagic)
	buf := make([]byte, max(0, min(int64(ScanChunk), size-from)))
	for off := from; off < size; {
		n := min(int64(len(buf)), size-off)
		chunk := buf[:n]
		if err := readFull(f, chunk, off); err != nil {
			return found, err
		}
		// Candidates must start in [off, off+limit); the last 3 bytes of a
		// non-final chunk are looked at again by the next chunk.
		limit := n
		if off+n < size {
			limit = n - 3
		}
		advance := limit
		for i := int64(0); i < limit; {
			j := bytes.Index(chunk[i:], magic[:])
			if j < 0 || i+int64(j) >= limit {
				break
			}
			p := off + i + int64(j)
			h, ok, err := batchAt(f, p, size)
			if err != nil {
				return found, err
			}
			if !ok || h.BaseOffset < minBase {
				i += int64(j) + 1
				continue
			}
			found = append(found, h)
			i = p + int64(h.Length) - off
			if i >= limit {
				advance = i
			}
		}
		off += advance
	}
	return found, nil
}

// batchAt reads and checks the batch at pos.
func batchAt(f io.ReaderAt, pos, size int64) (Header, bool, error) {
	if pos+HeaderFixed > size {
		return Header{}, false, nil
	}
	var hb [HeaderFixed + MaxProducerIDLen]byte
	hn := min(int64(len(hb)), size-pos)
	if err := readFull(f, hb[:hn], pos); err != nil {
		return Header{}, false, err
	}
	h, p := ParseHeader(hb[:hn])
	if p != OK || pos+int64(h.Length) > size {
		return Header{}, false, nil
	}
	b := make([]byte, h.Length)
	if err := readFull(f, b, pos); err != nil {
		return Header{}, false, err
	}
	h, _, p = CheckBatch(b)
	if p != OK {
		return Header{}, false, nil
	}
	h.ProducerID = append([]byte(nil), h.ProducerID...)
	return h, true, nil
}

// readFull reads len(b) bytes at off.
func readFull(f io.ReaderAt, b []byte, off int64) error {
	n, err := f.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// ReadFull reads exactly len(b) bytes at off (io.ErrUnexpectedEOF when the
// file is shorter).
func ReadFull(f io.ReaderAt, b []byte, off int64) error { return readFull(f, b, off) }
