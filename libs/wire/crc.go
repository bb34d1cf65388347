package wire

import "hash/crc32"

// castagnoli is built once; crc32 uses the SSE4.2/ARMv8 CRC instructions for
// this polynomial where the CPU has them.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC32C (Castagnoli) of b, the frame checksum of Wire v2
// (header offset 28, computed over the encoded payload bytes). The check value
// of "123456789" is 0xE3069283.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }
