// Package errcode is Strata's error catalogue: every error code of the spec
// (SERVICE-SPEC section 7, WIRE-V2 section 8) as a value with its class and
// retryable flag, and the typed Error that carries a code, a message and
// key=value fields through every hop.
//
// Every role builds client-visible failures from these values; the gateway
// encodes them as Wire v2 typed error payloads, and ToStatus/FromStatus carry
// them unchanged across internal gRPC calls.
package errcode
