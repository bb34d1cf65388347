// Package wire is Strata's Wire v2 codec: the byte-level client protocol of
// WIRE-V2.md and SERVICE-SPEC section 4.3, shared by the gateway, the Go
// client, the CLI and partitiond's storage format.
//
// The codec is pure: bytes in, values out. The one exception is FrameReader,
// a bounded reader of frames from an io.Reader that validates the 32-byte
// header before it allocates anything.
//
// What it holds:
//
//   - Frames: Header (ParseHeader, Header.AppendTo), Codec (per-connection
//     rules: command table, negotiated compression, length Limits) with
//     AppendFrame, CheckHeader, DecodePayload and DecodeFrame, and FrameReader.
//   - Compression: Compress and Decompress for none, gzip, snappy (raw block
//     written; raw block or xerial read) and LZ4 (frame format), with a hard
//     bound on the decoded size (no decompression bombs).
//   - Negotiation: NegotiationRequest, NegotiationResponse and Negotiate.
//   - Commands: the Command enum, its metadata (Command.Info) and the two
//     published numberings TableA and TableB (TableForNegotiate picks one per
//     connection).
//   - Command-schema payloads (CRQ2): Request, DecodeRequest, ParseText and
//     Request.AppendText.
//   - Batches (CBV2) and records: the zero-copy BatchView / RecordView /
//     RecordIter for the hot path, in-place patching (SetRecordOffset,
//     SetRecordPartition, BatchView.AssignOffsets), BatchBuilder to re-encode
//     a batch by concatenating stored records, and the plain Batch / Record
//     structs for tests and clients.
//   - Typed error payloads: AppendError and DecodeError over *errcode.Error.
//   - Text and JSON envelopes: StreamControl, AckResponse, offset lists
//     (P<partition>:<offset>) and "OK key=value" replies.
//
// Every decoder returns *errcode.Error values (codes invalid_frame,
// invalid_compressed_payload, decompressed_size_exceeded, negotiation_failed,
// decode_failed, malformed_input, unknown_command, invalid_batch_commit_entry,
// no_valid_offsets), never panics, and checks every declared count and length
// against the bytes that remain before allocating. docs/wire.md records the
// decisions behind the API.
package wire
