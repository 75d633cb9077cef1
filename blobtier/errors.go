package blobtier

import (
	"errors"
	"net/http"

	"gocloud.dev/gcerrors"
)

// ObjectError is the error of one request: the operation, the key (the
// listing prefix for OpList) and the cause, which wraps one of the package
// sentinels when one applies and the driver's error when there was one.
type ObjectError struct {
	Op  Op
	Key string
	Err error
}

func (e *ObjectError) Error() string {
	return "blobtier: " + string(e.Op) + " " + e.Key + ": " + e.Err.Error()
}

func (e *ObjectError) Unwrap() error { return e.Err }

// class is what blobtier makes of a driver error.
type class int

const (
	classOther        class = iota
	classNotFound           // the object (or bucket) does not exist
	classPrecondition       // a conditional write was refused
)

// classify is the one place where gocloud error codes and provider errors
// become blobtier's classes. It is the only code that looks inside driver
// errors.
func classify(err error) class {
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		return classNotFound
	case gcerrors.FailedPrecondition, gcerrors.AlreadyExists:
		return classPrecondition
	}
	// S3 answers 409 ConditionalRequestConflict when two conditional writes
	// to one key overlap; s3blob reports it as Unknown. Like a 412, it means
	// another write won (or is winning) the key.
	var coded interface{ ErrorCode() string }
	if errors.As(err, &coded) && coded.ErrorCode() == "ConditionalRequestConflict" {
		return classPrecondition
	}
	var status interface{ HTTPStatusCode() int }
	if errors.As(err, &status) && status.HTTPStatusCode() == http.StatusConflict {
		return classPrecondition
	}
	return classOther
}
