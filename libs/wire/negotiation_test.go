package wire

import (
	"testing"

	"github.com/strataio/strata/libs/errcode"
)

func TestNegotiationRequestValidation(t *testing.T) {
	cases := []struct {
		name   string
		b      []byte
		reason string
	}{
		{"Empty", nil, "truncated"},
		{"Truncated", []byte{0, 2, 0, 2, 0}, "truncated"},
		{"CountZero", []byte{0, 2, 0, 2, 0, 0}, "bad_count"},
		{"CountFive", []byte{0, 2, 0, 2, 0, 5, 0, 1, 2, 3, 0}, "bad_count"},
		{"MissingID", []byte{0, 2, 0, 2, 0, 2, 0}, "bad_length"},
		{"TrailingByte", []byte{0, 2, 0, 2, 0, 1, 0, 9}, "bad_length"},
		{"UnknownID", []byte{0, 2, 0, 2, 0, 1, 4}, "bad_compression"},
		{"Duplicate", []byte{0, 2, 0, 2, 0, 2, 1, 1}, "duplicate_compression"},
		{"MinZero", []byte{0, 0, 0, 2, 0, 1, 0}, "bad_version_range"},
		{"MaxBelowMin", []byte{0, 3, 0, 2, 0, 1, 0}, "bad_version_range"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeNegotiationRequest(tc.b)
			wantCode(t, err, errcode.DecodeFailed, tc.reason)
		})
	}
	if _, err := (NegotiationRequest{MinVersion: 2, MaxVersion: 2}).AppendTo(nil); err == nil {
		t.Fatal("encoded a request without preferences")
	}
}

func TestNegotiationResponseIsExactlyThreeBytes(t *testing.T) {
	for name, b := range map[string][]byte{
		"Short":       {0, 2},
		"Long":        {0, 2, 0, 0},
		"Version1":    {0, 1, 0},
		"Compression": {0, 2, 4},
	} {
		if _, err := DecodeNegotiationResponse(b); err == nil {
			t.Errorf("%s: accepted %x", name, b)
		}
	}
}

func TestNegotiateSelection(t *testing.T) {
	req := func(min, max uint16, c ...Compression) NegotiationRequest {
		return NegotiationRequest{MinVersion: min, MaxVersion: max, Compressions: c}
	}
	cases := []struct {
		name      string
		req       NegotiationRequest
		supported []Compression
		want      Compression
		reason    string
	}{
		{"FirstPreferenceWins", req(2, 2, CompressionLZ4, CompressionNone), AllCompressions, CompressionLZ4, ""},
		{"SkipsUnsupported", req(1, 3, CompressionSnappy, CompressionNone), []Compression{CompressionNone, CompressionGzip}, CompressionNone, ""},
		{"ServerOrderIrrelevant", req(2, 5, CompressionGzip, CompressionLZ4), []Compression{CompressionLZ4, CompressionGzip}, CompressionGzip, ""},
		{"RangeBelow", req(1, 1, CompressionNone), AllCompressions, 0, "no_common_version"},
		{"RangeAbove", req(3, 4, CompressionNone), AllCompressions, 0, "no_common_version"},
		{"NoCommonCompression", req(2, 2, CompressionLZ4), []Compression{CompressionNone}, 0, "no_common_compression"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Negotiate(tc.req, tc.supported)
			if tc.reason != "" {
				wantCode(t, err, errcode.NegotiationFailed, tc.reason)
				return
			}
			if err != nil || got != (NegotiationResponse{Version: 2, Compression: tc.want}) {
				t.Fatalf("%+v, %v", got, err)
			}
		})
	}
	_, err := Negotiate(req(2, 2, CompressionNone, CompressionNone), AllCompressions)
	wantCode(t, err, errcode.DecodeFailed, "duplicate_compression")
}
