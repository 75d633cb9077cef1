package drives

import (
	"errors"
	"fmt"
	"strings"

	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/internal/routed"
	"github.com/bucketlog/bucketlog/localseg"
)

// Actions of the one-shot verbs. They are the actions of the plain append
// and read outputs (cmd/bucketlog/doc.go), so a consumer of those outputs reads these
// too; the decision fields tell the routed outputs apart.
const (
	ActionAppend = "eventlog-append"
	ActionRead   = "eventlog-read-exec"
)

// AppendOutcome is the output of durable-eventlog-affinity-append: the
// append outcome of cmd/bucketlog/doc.go plus the routing decision. When the replica is
// not the owner, Decision is affinity.DecisionNotOwner, GlobalSequence and
// LogRecordCount are null and nothing was written; the CLI prints it and
// exits 6.
type AppendOutcome struct {
	Action         string  `json:"action"`
	ExecutionID    string  `json:"execution_id"`
	GlobalSequence *uint64 `json:"global_sequence"`
	ByteLen        int     `json:"byte_len"`
	CreatedStream  bool    `json:"created_stream"`
	LogRecordCount *uint64 `json:"log_record_count"`
	Decision       string  `json:"decision"`
	ShardIndex     int     `json:"shard_index"`
	ShardCount     int     `json:"shard_count"`
	OwnerShard     int     `json:"owner_shard"`
}

// Refused reports whether the append was refused because another shard
// owns the execution.
func (o AppendOutcome) Refused() bool { return o.Decision == affinity.DecisionNotOwner }

// NotOwner returns the refusal as a *affinity.NotOwnerError (nil when the
// append was served), for callers that report refusals through their error
// path (cmd/bucketlog/doc.go: class not_owner with owner_shard).
func (o AppendOutcome) NotOwner() error {
	if !o.Refused() {
		return nil
	}
	return &affinity.NotOwnerError{Owner: o.OwnerShard, Shard: o.ShardIndex, ExecutionID: o.ExecutionID}
}

// ReadOutcome is the output of durable-eventlog-affinity-read: the read
// outcome of cmd/bucketlog/doc.go plus who served it (affinity.ServedByOwnerResident or
// affinity.ServedByNonOwnerColdLoad).
type ReadOutcome struct {
	Action      string   `json:"action"`
	ExecutionID string   `json:"execution_id"`
	Exists      bool     `json:"exists"`
	Base        uint64   `json:"base"`
	Clamped     bool     `json:"clamped"`
	RecordCount uint64   `json:"record_count"`
	Returned    int      `json:"returned"`
	Records     []Record `json:"records"`
	ServedBy    string   `json:"served_by"`
	ShardIndex  int      `json:"shard_index"`
	ShardCount  int      `json:"shard_count"`
	OwnerShard  int      `json:"owner_shard"`
}

// AffinityAppend is one routed append by the replica own over root: it
// opens the replica (its own shard writable, as a server would, so it fails
// with localseg.ErrLocked while another process holds that shard), appends
// ev when it owns the execution, and closes. A refusal is not an error:
// the outcome says not_owner and nothing was written. Errors are invalid
// configuration (affinity.ErrConfig), invalid input (localseg.ErrInvalidInput,
// checked before routing) and storage failures.
func AffinityAppend(root string, own affinity.Ownership, ev localseg.Event) (AppendOutcome, error) {
	l, err := routed.Open(root, own, routed.Options{})
	if err != nil {
		return AppendOutcome{}, err
	}
	out := AppendOutcome{
		Action:      ActionAppend,
		ExecutionID: strings.TrimSpace(ev.ExecutionID),
		ByteLen:     len(ev.Payload),
		ShardIndex:  own.Index,
		ShardCount:  own.Count,
		OwnerShard:  own.OwnerOf(ev.ExecutionID),
	}
	res, err := l.Append(ev)
	if cerr := l.Close(); err == nil && cerr != nil {
		return AppendOutcome{}, fmt.Errorf("close: %w", cerr)
	}
	var noe *affinity.NotOwnerError
	switch {
	case errors.As(err, &noe):
		out.Decision = affinity.DecisionNotOwner
		out.OwnerShard = noe.Owner
		return out, nil
	case err != nil:
		return AppendOutcome{}, err
	}
	out.Decision = affinity.DecisionOwned
	out.GlobalSequence = &res.Seq
	out.CreatedStream = res.Created
	out.LogRecordCount = &res.Tip
	return out, nil
}

// AffinityRead is one routed read of executionID by the replica own over
// root: the owner serves it from its store, any other replica cold-loads
// the owner's shard read-only (changing nothing). It opens the replica as
// AffinityAppend does.
func AffinityRead(root string, own affinity.Ownership, executionID string, after uint64, limit int) (ReadOutcome, error) {
	l, err := routed.Open(root, own, routed.Options{})
	if err != nil {
		return ReadOutcome{}, err
	}
	res, err := l.Read(executionID, after, limit)
	if cerr := l.Close(); err == nil && cerr != nil {
		return ReadOutcome{}, fmt.Errorf("close: %w", cerr)
	}
	if err != nil {
		return ReadOutcome{}, err
	}
	return ReadOutcome{
		Action:      ActionRead,
		ExecutionID: strings.TrimSpace(executionID),
		Exists:      res.Page.Exists,
		Base:        res.Page.Base,
		Clamped:     res.Page.Clamped,
		RecordCount: res.Page.RecordCount,
		Returned:    len(res.Page.Records),
		Records:     records(res.Page.Records),
		ServedBy:    res.ServedBy,
		ShardIndex:  own.Index,
		ShardCount:  own.Count,
		OwnerShard:  res.Shard,
	}, nil
}
