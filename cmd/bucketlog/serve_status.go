package main

import (
	"net/http"

	"github.com/bucketlog/bucketlog"
)

// statusOutput is GET /v1/status: one entry per shard this process serves.
type statusOutput struct {
	Action string             `json:"action"`
	Shards []bucketlog.Status `json:"shards"`
}

// status is GET /v1/status: the shard's tip, what the bucket holds and
// what is on the local disk only, and the bucket's latest trouble. It
// answers 200 whatever the state (readiness is /readyz's).
func (a *api) status(w http.ResponseWriter, r *http.Request, l *bucketlog.Log) {
	if len(r.URL.Query()) > 0 {
		writeError(w, nil, usagef("GET /v1/status takes no query parameters"))
		return
	}
	writeBody(w, http.StatusOK, statusOutput{Action: "status", Shards: []bucketlog.Status{l.Status()}})
}
