package main

import (
	"fmt"

	"github.com/bucketlog/bucketlog/localseg"
)

const tailAbout = `
Pulls up to --limit events after the consumer's cursor from shard --shard,
creating the durable consumer on its first pull of a non-empty shard. A pull
of a shard that holds nothing answers "exists":false and writes nothing.
Output:
  {"action":"eventlog-tail","consumer","exists","created_consumer",
   "acked_sequence","pending_count","returned","records":[…]}
The command takes the shard's writer lock (exit 3 while a server owns it).
Under NOETL_EHDB_EVENTLOG_BACKEND=local_reference it uses the JSONL driver.`

func runTail(c *cli, args []string) int {
	s := newOneShard("tail", "--consumer C [--dir PATH] [--shard N] [--limit N] [--bucket URL]", tailAbout)
	consumer := s.f.String("consumer", "", "the consumer name `C` ([A-Za-z0-9_-], required)")
	limit := s.f.Int("limit", defaultLimit, fmt.Sprintf("at most this many records, 0 to %d", maxLimit))
	bucket := addBucketFlag(s.f, "the bucket the shard ships to")
	if stop, code := c.parse(s.f, args); stop {
		return code
	}
	if err := requireFlags(s.f, "consumer"); err != nil {
		return c.fail(err)
	}
	if *limit < 0 || *limit > maxLimit {
		return c.fail(usagef("--limit %d is outside 0..%d", *limit, maxLimit))
	}
	env, opts, n, err := s.resolve(c)
	if err != nil {
		return c.fail(err)
	}
	name, err := checkName("consumer", *consumer)
	if err != nil {
		return c.fail(err)
	}
	if opts.BucketURL, err = bucket.value(s.f, env); err != nil {
		return c.fail(err)
	}
	if opts.BucketURL == "" {
		if err := existingRoot(opts.Dir); err != nil {
			return c.fail(err)
		}
	}
	b := backendOf(env)
	if err := b.refuseFlags(c, s.f, env, "bucket"); err != nil {
		return c.fail(err)
	}
	l, err := b.open(c, opts, n, openWrite)
	if err != nil {
		return c.fail(err)
	}
	if l == nil {
		return c.emit(tailOf(name, localseg.PullResult{}))
	}
	r, err := l.Pull(c.ctx, name, *limit)
	c.closeLog(l)
	if err != nil {
		return c.fail(err)
	}
	return c.emit(tailOf(name, r))
}

// consumerCmd is the set-up of ack and consumer-delete: it opens the shard
// writable, or answers that the consumer is unknown when the shard holds
// nothing (without creating it).
type consumerCmd struct {
	*oneShard
	consumer *string
	bucket   *bucketFlag
}

func newConsumerCmd(name, synopsis, about string) *consumerCmd {
	s := newOneShard(name, synopsis, about)
	return &consumerCmd{
		oneShard: s,
		consumer: s.f.String("consumer", "", "the consumer name `C` (required)"),
		bucket:   addBucketFlag(s.f, "the bucket the shard ships to"),
	}
}

// open opens the consumer's shard on the backend (nil with a nil error
// when the shard holds nothing) and returns the trimmed consumer name.
func (k *consumerCmd) open(c *cli) (l shardLog, name string, err error) {
	env, opts, n, err := k.resolve(c)
	if err != nil {
		return nil, "", err
	}
	if name, err = checkName("consumer", *k.consumer); err != nil {
		return nil, "", err
	}
	if opts.BucketURL, err = k.bucket.value(k.f, env); err != nil {
		return nil, "", err
	}
	b := backendOf(env)
	if err := b.refuseFlags(c, k.f, env, "bucket"); err != nil {
		return nil, "", err
	}
	l, err = b.open(c, opts, n, openWrite)
	return l, name, err
}

func unknownConsumer(name string) error {
	return fmt.Errorf("%w: %s (the shard holds no store)", localseg.ErrUnknownConsumer, name)
}

const ackAbout = `
Moves the consumer's cursor forward to --sequence (an Ack frame, fsync'd).
Acking at or below the cursor (but above 0) is a no-op that succeeds; acking
0 or beyond the tip, or an unknown consumer, is invalid_state (exit 3).
Output:
  {"action":"eventlog-ack","consumer","acked_sequence"}
Under NOETL_EHDB_EVENTLOG_BACKEND=local_reference it uses the JSONL driver.`

func runAck(c *cli, args []string) int {
	k := newConsumerCmd("ack", "--consumer C --sequence N [--dir PATH] [--shard N] [--bucket URL]", ackAbout)
	seq := k.f.Uint64("sequence", 0, "the sequence `N` to ack through (required)")
	if stop, code := c.parse(k.f, args); stop {
		return code
	}
	if err := requireFlags(k.f, "consumer", "sequence"); err != nil {
		return c.fail(err)
	}
	l, name, err := k.open(c)
	var acked uint64
	switch {
	case err != nil:
	case l != nil:
		acked, err = l.Ack(c.ctx, name, *seq)
		c.closeLog(l)
	default:
		err = unknownConsumer(name)
	}
	if err != nil {
		return c.fail(err)
	}
	return c.emit(ackOutput{Action: actionAck, Consumer: name, AckedSequence: acked})
}

const consumerDeleteAbout = `
Deletes a durable consumer (a ConsumerDelete frame): it stops bounding GC,
and replay forgets it. An unknown consumer is invalid_state (exit 3).
Output:
  {"action":"eventlog-consumer-delete","consumer","deleted":true}
Under NOETL_EHDB_EVENTLOG_BACKEND=local_reference it uses the JSONL driver.`

func runConsumerDelete(c *cli, args []string) int {
	k := newConsumerCmd("consumer-delete", "--consumer C [--dir PATH] [--shard N] [--bucket URL]", consumerDeleteAbout)
	if stop, code := c.parse(k.f, args); stop {
		return code
	}
	if err := requireFlags(k.f, "consumer"); err != nil {
		return c.fail(err)
	}
	l, name, err := k.open(c)
	switch {
	case err != nil:
	case l != nil:
		err = l.DeleteConsumer(c.ctx, name)
		c.closeLog(l)
	default:
		err = unknownConsumer(name)
	}
	if err != nil {
		return c.fail(err)
	}
	return c.emit(deleteOutput{Action: actionConsumerDelete, Consumer: name, Deleted: true})
}
