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
// answers 200 whatever the state (readiness is /readyz's), also before the
// engine is open: the shard is then "opening" (a long recovery or
// hydration shows), and nothing else about it is known yet.
func (a *api) status(w http.ResponseWriter, r *http.Request) {
	if len(r.URL.Query()) > 0 {
		writeError(w, nil, usagef("GET /v1/status takes no query parameters"))
		return
	}
	st := bucketlog.Status{Shard: a.own.Index, State: "opening", Reason: errOpening.Error()}
	if l := a.log.Load(); l != nil {
		st = l.Status()
	}
	writeBody(w, http.StatusOK, statusOutput{Action: "status", Shards: []bucketlog.Status{st}})
}
