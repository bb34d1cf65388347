package errcode

import (
	"context"
	"errors"

	commonv1 "github.com/strataio/strata/proto/strata/common/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ToProto converts a typed error to its wire-neutral proto form.
func ToProto(e *Error) *commonv1.Error {
	if e == nil {
		return nil
	}
	p := &commonv1.Error{Code: e.Code, Class: uint32(e.Class), Retryable: e.Retryable, Message: e.Message}
	for _, f := range e.Fields {
		p.Fields = append(p.Fields, &commonv1.Field{Key: f.Key, Value: f.Value})
	}
	return p
}

// FromProto converts the proto form back; nil stays nil. An invalid class
// falls back to the catalogue class of the code.
func FromProto(p *commonv1.Error) *Error {
	if p == nil {
		return nil
	}
	e := &Error{Code: p.GetCode(), Class: Class(p.GetClass()), Retryable: p.GetRetryable(), Message: p.GetMessage()}
	if e.Code == "" {
		e.Code = Internal.Name()
	}
	if !e.Class.Valid() {
		c := Lookup(e.Code)
		e.Class, e.Retryable = c.class, c.retryable
	}
	for _, f := range p.GetFields() {
		e.Fields = append(e.Fields, Field{Key: f.GetKey(), Value: f.GetValue()})
	}
	e.Normalize()
	return e
}

// grpcCode maps a class to the closest gRPC status code. Only the detail is
// authoritative; the status code helps generic gRPC tooling.
func grpcCode(c Class) codes.Code {
	switch c {
	case ClassValidation:
		return codes.InvalidArgument
	case ClassAuthorization:
		return codes.PermissionDenied
	case ClassRouting, ClassFencing:
		return codes.FailedPrecondition
	case ClassAvailability:
		return codes.Unavailable
	case ClassConflict:
		return codes.Aborted
	case ClassNotFound:
		return codes.NotFound
	default:
		return codes.Internal
	}
}

// ToStatus converts err to a gRPC status error whose detail carries the typed
// error, so it survives the hop unchanged. Untyped errors become internal
// errors; context errors become request_cancelled / request_timeout.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		if _, typed := As(err); !typed {
			return err // already a status (e.g. from a nested call); keep it
		}
	}
	e := fromContextErr(err)
	st := status.New(grpcCode(e.Class), e.Error())
	if withDetail, derr := st.WithDetails(ToProto(e)); derr == nil {
		st = withDetail
	}
	return st.Err()
}

func fromContextErr(err error) *Error {
	if e, ok := As(err); ok {
		return e
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return RequestTimeout.New(err.Error())
	case errors.Is(err, context.Canceled):
		return RequestCancelled.New(err.Error())
	}
	return Internal.New(err.Error())
}

// FromStatus recovers the typed error from a gRPC error. Statuses without a
// Strata detail are mapped by status code: Unavailable and DeadlineExceeded
// are retryable availability errors, so callers may retry transport failures.
func FromStatus(err error) *Error {
	if err == nil {
		return nil
	}
	if e, ok := As(err); ok {
		return e
	}
	st, ok := status.FromError(err)
	if !ok {
		return fromContextErr(err)
	}
	for _, d := range st.Details() {
		if p, ok := d.(*commonv1.Error); ok {
			return FromProto(p)
		}
	}
	switch st.Code() {
	case codes.Unavailable:
		return RouterNotAvailable.New(st.Message())
	case codes.DeadlineExceeded:
		return RequestTimeout.New(st.Message())
	case codes.Canceled:
		return RequestCancelled.New(st.Message())
	case codes.PermissionDenied, codes.Unauthenticated:
		return PeerRoleForbidden.New(st.Message())
	case codes.Unimplemented:
		return UnsupportedFeature.New(st.Message())
	}
	return Internal.New(st.Message())
}
