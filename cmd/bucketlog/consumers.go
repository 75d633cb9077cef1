package main

import (
	"fmt"
	"maps"
	"net/http"
	"slices"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/localseg"
)

// See the consumers: GET /v1/consumers, GET /v1/consumers/{name} and the
// consumers command list a shard's durable consumers with their cursor,
// what is pending and whether they hold GC back. A consumer holds GC back
// when its cursor is the lowest of the shard's consumers and below the
// tip: consumer-interest GC cannot reclaim past it (delete it, or ack,
// to let GC go on).

func init() {
	register(command{name: "consumers", group: groupLog, run: runConsumers,
		summary: "list one shard's consumers: cursor, pending count, whether each holds GC back"})
}

const (
	actionConsumers = "eventlog-consumers"
	actionConsumer  = "eventlog-consumer"
)

// consumerInfo is one consumer of the listing.
type consumerInfo struct {
	Consumer    string `json:"consumer"`
	Acked       uint64 `json:"acked_sequence"`
	Pending     uint64 `json:"pending_count"`
	HoldsGCBack bool   `json:"holds_gc_back"`
}

type consumersOutput struct {
	Action    string         `json:"action"`
	Tip       uint64         `json:"log_record_count"`
	Base      uint64         `json:"base"`
	Consumers []consumerInfo `json:"consumers"`
}

type consumerOutput struct {
	Action string `json:"action"`
	consumerInfo
}

// consumersOf lists the consumers of snap, sorted by name.
func consumersOf(snap localseg.Snapshot) consumersOutput {
	out := consumersOutput{Action: actionConsumers, Tip: snap.Tip, Base: snap.ReclaimedSeq + 1, Consumers: []consumerInfo{}}
	lowest := uint64(0)
	for i, name := range slices.Sorted(maps.Keys(snap.Consumers)) {
		c := snap.Consumers[name]
		if i == 0 || c < lowest {
			lowest = c
		}
		out.Consumers = append(out.Consumers, consumerInfo{Consumer: name, Acked: c, Pending: snap.Tip - min(c, snap.Tip)})
	}
	for i := range out.Consumers {
		out.Consumers[i].HoldsGCBack = out.Consumers[i].Acked == lowest && lowest < snap.Tip
	}
	return out
}

// consumerOf is one consumer of the listing, or the unknown-consumer error.
func consumerOf(list consumersOutput, name string) (consumerOutput, error) {
	for _, c := range list.Consumers {
		if c.Consumer == name {
			return consumerOutput{Action: actionConsumer, consumerInfo: c}, nil
		}
	}
	return consumerOutput{}, fmt.Errorf("%w: %s", localseg.ErrUnknownConsumer, name)
}

// listConsumers is GET /v1/consumers.
func (a *api) listConsumers(w http.ResponseWriter, r *http.Request, l *bucketlog.Log) {
	if len(r.URL.Query()) > 0 {
		writeError(w, nil, usagef("the consumers listing takes no query parameters"))
		return
	}
	snap, err := l.Store().Snapshot()
	if err != nil {
		writeError(w, nil, err)
		return
	}
	writeBody(w, http.StatusOK, consumersOf(snap))
}

// getConsumer is GET /v1/consumers/{name}: 404 for an unknown consumer
// (it is not created).
func (a *api) getConsumer(w http.ResponseWriter, r *http.Request, l *bucketlog.Log) {
	name, err := checkName("consumer", r.PathValue("name"))
	if err == nil && len(r.URL.Query()) > 0 {
		err = usagef("a consumer's state takes no query parameters")
	}
	if err != nil {
		writeError(w, nil, err)
		return
	}
	snap, err := l.Store().Snapshot()
	if err != nil {
		writeError(w, nil, err)
		return
	}
	out, err := consumerOf(consumersOf(snap), name)
	if err != nil {
		writeError(w, nil, err)
		return
	}
	writeBody(w, http.StatusOK, out)
}

const consumersAbout = `
Lists one shard's durable consumers, read-only (no lock, nothing written; it
works while a server owns the shard). Output:
  {"action":"eventlog-consumers","log_record_count","base",
   "consumers":[{"consumer","acked_sequence","pending_count","holds_gc_back"}]}
sorted by name. holds_gc_back is true for the consumers whose cursor is the
lowest and below the tip: consumer-interest GC cannot reclaim past them (ack
or consumer-delete them). With --consumer C, that consumer alone:
  {"action":"eventlog-consumer","consumer","acked_sequence","pending_count","holds_gc_back"}
(an unknown consumer exits 3, and is not created). Over HTTP (serve):
GET /v1/consumers and GET /v1/consumers/{name} (404 if unknown). A pull of an
unknown consumer still creates it (its answer says "created_consumer":true,
and the log names it).`

func runConsumers(c *cli, args []string) int {
	s := newOneShard("consumers", "[--dir PATH] [--shard N] [--consumer C]", consumersAbout)
	consumer := s.f.String("consumer", "", "show this consumer `C` only")
	if stop, code := c.parse(s.f, args); stop {
		return code
	}
	env, opts, _, err := s.resolve(c)
	if err == nil {
		err = existingRoot(opts.Dir)
	}
	if err == nil && !backendOf(env).durable() {
		err = usagef("consumers reads the durable segment store only")
	}
	name := ""
	if err == nil && s.f.isSet("consumer") {
		name, err = checkName("consumer", *consumer)
	}
	if err != nil {
		return c.fail(err)
	}
	opts.ReadOnly, opts.BucketURL = true, ""
	l, err := bucketlog.Open(c.ctx, opts)
	if err != nil {
		return c.fail(err)
	}
	snap, err := l.Store().Snapshot()
	c.closeLog(l)
	if err != nil {
		return c.fail(err)
	}
	list := consumersOf(snap)
	if name == "" {
		return c.emit(list)
	}
	one, err := consumerOf(list, name)
	if err != nil {
		return c.fail(err)
	}
	return c.emit(one)
}
