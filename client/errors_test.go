package client

import (
	"errors"
	"net/http"
	"testing"

	"github.com/bucketlog/bucketlog"
)

// TestErrorClassesMatchTheEngine: every class a server answers is
// errors.Is the engine's sentinel of that class, fenced included.
func TestErrorClassesMatchTheEngine(t *testing.T) {
	for _, c := range []struct {
		class  string
		status int
		want   error
	}{
		{bucketlog.ClassUsage, http.StatusBadRequest, bucketlog.ErrUsage},
		{bucketlog.ClassInvalidInput, http.StatusBadRequest, bucketlog.ErrInvalidInput},
		{bucketlog.ClassInvalidState, http.StatusConflict, bucketlog.ErrInvalidState},
		{bucketlog.ClassNotOwner, http.StatusMisdirectedRequest, bucketlog.ErrNotOwner},
		{bucketlog.ClassNotInBucket, http.StatusAccepted, bucketlog.ErrNotInBucket},
		{bucketlog.ClassInvariant, http.StatusInternalServerError, bucketlog.ErrInvariant},
		{bucketlog.ClassFenced, http.StatusConflict, bucketlog.ErrFenced},
	} {
		err := error(&Error{Status: c.status, Class: c.class, Message: "x"})
		if !errors.Is(err, c.want) {
			t.Errorf("class %q: errors.Is(%v) = false", c.class, c.want)
		}
	}
}
