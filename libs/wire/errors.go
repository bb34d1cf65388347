package wire

import (
	"strconv"

	"github.com/strataio/strata/libs/errcode"
)

// Payload names used in the "payload" field of decode_failed errors, so a
// caller can tell which decoder refused the bytes.
const (
	payloadCRQ2        = "crq2"
	payloadCBV2        = "cbv2"
	payloadRecord      = "record"
	payloadError       = "error"
	payloadNegotiation = "negotiation"
	payloadStream      = "stream_control"
	payloadAck         = "ack"
	payloadOK          = "ok_text"
)

// frameError reports a violated framing rule (errcode.InvalidFrame).
func frameError(reason, msg string, kv ...string) *errcode.Error {
	return errcode.InvalidFrame.New(msg, append([]string{"reason", reason}, kv...)...)
}

// decodeError reports a malformed payload (errcode.DecodeFailed).
func decodeError(payload, reason, msg string, kv ...string) *errcode.Error {
	return errcode.DecodeFailed.New(msg, append([]string{"payload", payload, "reason", reason}, kv...)...)
}

// encodeError reports a value an encoder refuses to write (errcode.MalformedInput).
func encodeError(payload, reason, msg string, kv ...string) *errcode.Error {
	return errcode.MalformedInput.New(msg, append([]string{"payload", payload, "reason", reason}, kv...)...)
}

func compressedError(c Compression, reason, msg string) *errcode.Error {
	return errcode.InvalidCompressedPayload.New(msg, "compression", c.String(), "reason", reason)
}

func bombError(c Compression, declared int) *errcode.Error {
	return errcode.DecompressedSizeExceeded.New("payload decompresses to more than its declared decoded length",
		"compression", c.String(), "decoded_length", strconv.Itoa(declared))
}

func itoa(v int) string      { return strconv.Itoa(v) }
func u32toa(v uint32) string { return strconv.FormatUint(uint64(v), 10) }
func hex32(v uint32) string  { return "0x" + strconv.FormatUint(uint64(v), 16) }
