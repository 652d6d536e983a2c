package server

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/termd/termd/daemon/errdefs"
)

var kindCode = map[errdefs.Kind]codes.Code{
	errdefs.KindInternal:     codes.Internal,
	errdefs.KindInvalid:      codes.InvalidArgument,
	errdefs.KindNotFound:     codes.NotFound,
	errdefs.KindPrecondition: codes.FailedPrecondition,
	errdefs.KindPermission:   codes.PermissionDenied,
	errdefs.KindExhausted:    codes.ResourceExhausted,
	errdefs.KindUnavailable:  codes.Unavailable,
	errdefs.KindExists:       codes.AlreadyExists,
}

// toStatus maps domain errors to gRPC status errors.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	switch {
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(kindCode[errdefs.KindOf(err)], err.Error())
}
