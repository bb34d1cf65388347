package wire

import "encoding/binary"

// decoder reads big-endian values from a byte slice. A read past the end sets
// short and yields zero values, so a caller checks once after a group of reads
// instead of after every field. Strings and byte arrays are returned as
// sub-slices of the input: nothing is copied or allocated.
type decoder struct {
	b     []byte
	off   int
	short bool
}

func (d *decoder) remaining() int { return len(d.b) - d.off }

func (d *decoder) take(n int) []byte {
	if d.short || n < 0 || n > len(d.b)-d.off {
		d.short = true
		return nil
	}
	s := d.b[d.off : d.off+n : d.off+n]
	d.off += n
	return s
}

func (d *decoder) u8() uint8 {
	if s := d.take(1); s != nil {
		return s[0]
	}
	return 0
}

func (d *decoder) u16() uint16 {
	if s := d.take(2); s != nil {
		return binary.BigEndian.Uint16(s)
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if s := d.take(4); s != nil {
		return binary.BigEndian.Uint32(s)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if s := d.take(8); s != nil {
		return binary.BigEndian.Uint64(s)
	}
	return 0
}

// bytes reads a u32 length and that many bytes. The length is compared with
// the bytes that remain before anything else happens.
func (d *decoder) bytes() []byte {
	n := d.u32()
	if d.short {
		return nil
	}
	if uint64(n) > uint64(len(d.b)-d.off) {
		d.short = true
		return nil
	}
	return d.take(int(n))
}

func appendU16(b []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(b, v) }
func appendU32(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }
func appendU64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

// appendString writes a u32 length and the bytes of s. Callers bound the
// length (every encoder checks PublicMaxPayload) before the u32 conversion.
func appendString(b []byte, s string) []byte {
	b = appendU32(b, uint32(len(s)))
	return append(b, s...)
}

func appendBytes(b []byte, s []byte) []byte {
	b = appendU32(b, uint32(len(s)))
	return append(b, s...)
}
