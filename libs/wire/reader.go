package wire

import (
	"errors"
	"fmt"
	"io"
)

// retainMax is the largest buffer a FrameReader keeps between frames; a
// buffer grown for one huge frame is dropped instead of pinning memory for
// the life of the connection.
const retainMax = 4 << 20

// readChunk is how far a payload buffer grows ahead of the bytes actually
// received, so a header that declares a large length cannot make the reader
// allocate it before the peer sends it.
const readChunk = 1 << 20

// ownedUpFront is how much of an uncompressed payload ReadFrameOwned
// allocates before its bytes arrive.
const ownedUpFront = 16 << 20

// FrameReader reads frames from an io.Reader (a connection). For each frame it
// reads the 32-byte header, checks it completely with the Codec (lengths
// before anything is allocated), then reads the payload into a buffer it
// reuses from frame to frame, verifies the CRC32C and decompresses into a
// second reused buffer. It is not safe for concurrent use.
type FrameReader struct {
	r   io.Reader
	hdr [HeaderSize]byte
	enc []byte
	dec []byte
}

// NewFrameReader returns a FrameReader over r. Wrap r in a bufio.Reader when
// frames are small and the reader is a raw connection.
func NewFrameReader(r io.Reader) *FrameReader { return &FrameReader{r: r} }

// ReadFrame reads and decodes the next frame under the rules of c (which may
// change between calls, for instance after negotiation). The returned
// Payload is valid only until the next call.
//
// Errors: io.EOF when the stream ends cleanly before a frame; an error
// wrapping io.ErrUnexpectedEOF (or the reader's error, such as a deadline)
// when it ends inside one; a typed *errcode.Error for a frame that breaks a
// rule. After a header error the stream position is unknown and the
// connection must be closed; after a payload error (CRC, decompression) the
// stream is still aligned on the next frame, and the returned Frame carries
// the header so the server can answer that request id.
func (fr *FrameReader) ReadFrame(c *Codec) (Frame, error) {
	h, err := fr.ReadHeader(c)
	if err != nil {
		return Frame{}, err
	}
	return fr.ReadPayload(c, h)
}

// ReadPayload reads and decodes the payload of the frame whose header
// ReadHeader just returned. Splitting the two lets a server admit the frame
// (a per-connection or global memory budget on h.EncodedLength and
// h.DecodedLength) after the header is checked and before anything is
// allocated. The Payload is valid until the next read.
func (fr *FrameReader) ReadPayload(c *Codec, h Header) (Frame, error) {
	enc, err := fr.readPayload(int(h.EncodedLength))
	if err != nil {
		return Frame{Header: h}, err
	}
	if cap(fr.dec) > retainMax {
		fr.dec = nil
	}
	p, err := c.DecodePayload(h, enc, fr.dec)
	if err != nil {
		return Frame{Header: h}, err
	}
	if h.Compression() != CompressionNone && !h.Kind.IsNegotiation() && len(p) > 0 {
		fr.dec = p[:0]
	}
	return Frame{Header: h, Payload: p}, nil
}

// ReadFirstFrame reads a connection's first frame, which must be a
// negotiation request, and selects the connection's command table from its
// NEGOTIATE id (TableForNegotiate: 46 is TableA, 47 TableB). lim bounds the
// frame (NegotiationLimits is the natural choice). Anything else as the first
// frame is an errcode.InvalidFrame and the connection must be refused.
func (fr *FrameReader) ReadFirstFrame(lim Limits) (Frame, *CommandTable, error) {
	h, err := fr.readHeader()
	if err != nil {
		return Frame{}, nil, err
	}
	if h.Kind != KindNegotiationRequest {
		return Frame{Header: h}, nil, frameError("not_negotiation", "the first frame must be a negotiation request",
			"kind", h.Kind.String())
	}
	table, ok := TableForNegotiate(h.Command)
	if !ok {
		return Frame{Header: h}, nil, frameError("unknown_command", "NEGOTIATE id matches no command table",
			"command", itoa(int(h.Command)))
	}
	c := &Codec{Table: table, Limits: lim}
	if err := c.CheckHeader(h); err != nil {
		return Frame{Header: h}, nil, err
	}
	enc, err := fr.readPayload(int(h.EncodedLength))
	if err != nil {
		return Frame{Header: h}, nil, err
	}
	p, err := c.DecodePayload(h, enc, nil)
	if err != nil {
		return Frame{Header: h}, nil, err
	}
	return Frame{Header: h, Payload: p}, table, nil
}

// ReadHeader reads and checks only the next header; follow it with
// ReadPayload (ReadFrame does both).
func (fr *FrameReader) ReadHeader(c *Codec) (Header, error) {
	h, err := fr.readHeader()
	if err != nil {
		return Header{}, err
	}
	if err := c.CheckHeader(h); err != nil {
		return h, err
	}
	return h, nil
}

// readHeader reads the next 32 bytes and applies ParseHeader.
func (fr *FrameReader) readHeader() (Header, error) {
	if n, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
		if n == 0 && errors.Is(err, io.EOF) {
			return Header{}, io.EOF
		}
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return Header{}, fmt.Errorf("wire: read frame header (%d of %d bytes): %w", n, HeaderSize, err)
	}
	return ParseHeader(fr.hdr[:])
}

// readPayload reads n bytes into the reusable buffer.
func (fr *FrameReader) readPayload(n int) ([]byte, error) {
	if cap(fr.enc) > retainMax {
		fr.enc = nil
	}
	b, err := fr.readInto(fr.enc[:0], n)
	if err != nil {
		return nil, err
	}
	fr.enc = b
	return b, nil
}

// readInto reads n bytes into b (length 0), growing it at most readChunk
// ahead of the bytes that actually arrived.
func (fr *FrameReader) readInto(b []byte, n int) ([]byte, error) {
	if cap(b) >= n {
		b = b[:n]
		if got, err := io.ReadFull(fr.r, b); err != nil {
			return nil, payloadReadError(got, n, err)
		}
		return b, nil
	}
	for len(b) < n {
		want := min(n, max(2*len(b), len(b)+readChunk))
		if cap(b) < want {
			grown := make([]byte, len(b), want)
			copy(grown, b)
			b = grown
		}
		got, err := io.ReadFull(fr.r, b[len(b):want])
		b = b[:len(b)+got]
		if err != nil {
			return nil, payloadReadError(len(b), n, err)
		}
	}
	return b, nil
}

// ReadFrameOwned is ReadFrame for a caller that keeps the payload, such as a
// client handing replies to its callers: the payload is read, or
// decompressed, into a buffer of its own that the reader never reuses, so
// the caller needs no copy. An uncompressed payload is allocated at its
// length up to ownedUpFront (16 MiB) before its bytes arrive, instead of
// growing with them as ReadFrame's buffer does (a 10 MB CONSUME reply cost
// four reallocations, their clearing and copies, and then the caller's copy
// out of the reused buffer); beyond that it grows as they arrive.
func (fr *FrameReader) ReadFrameOwned(c *Codec) (Frame, error) {
	return fr.ReadFrameOwnedInto(c, nil)
}

// ReadFrameOwnedInto is ReadFrameOwned with the buffer of an uncompressed
// payload taken from alloc, so a caller can reuse the buffers of payloads
// it is done with: alloc(n) returns a slice of length 0 and capacity at
// least n, whose old contents are overwritten, never read (n is the
// payload length, at most 16 MiB). A nil alloc allocates.
func (fr *FrameReader) ReadFrameOwnedInto(c *Codec, alloc func(n int) []byte) (Frame, error) {
	h, err := fr.ReadHeader(c)
	if err != nil {
		return Frame{}, err
	}
	n := int(h.EncodedLength)
	var enc []byte
	switch {
	case h.Compression() != CompressionNone && !h.Kind.IsNegotiation():
		enc, err = fr.readPayload(n) // decompressed into a new buffer below
	case alloc != nil:
		enc, err = fr.readInto(alloc(min(n, ownedUpFront)), n)
	default:
		enc, err = fr.readInto(make([]byte, 0, min(n, ownedUpFront)), n)
	}
	if err != nil {
		return Frame{Header: h}, err
	}
	p, err := c.DecodePayload(h, enc, nil)
	if err != nil {
		return Frame{Header: h}, err
	}
	return Frame{Header: h, Payload: p}, nil
}

func payloadReadError(got, want int, err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("wire: read frame payload (%d of %d bytes): %w", got, want, err)
}
