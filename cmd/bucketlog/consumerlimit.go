package main

import (
	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/localseg"
)

// maxConsumersFlag is serve's --max-consumers: a pull that would create one
// consumer more than the limit answers 409 (invalid_state) naming it
// (localseg/consumerlimit.go).
type maxConsumersFlag struct{ n int }

func addMaxConsumersFlag(f *flagSet) *maxConsumersFlag {
	m := &maxConsumersFlag{}
	f.IntVar(&m.n, "max-consumers", localseg.DefaultMaxConsumers, "the consumers a shard may hold, 1 to 50000; a pull that would create one more answers 409 naming the limit")
	return m
}

// apply puts the flag into o when it is set.
func (m *maxConsumersFlag) apply(f *flagSet, o *bucketlog.Options) error {
	if !f.isSet("max-consumers") {
		return nil
	}
	if m.n < 1 || m.n > localseg.MaxConsumersCeiling {
		return usagef("--max-consumers %d is outside 1..%d (the cursor object lists every consumer and stays below 15 MiB)", m.n, localseg.MaxConsumersCeiling)
	}
	o.MaxConsumers = m.n
	return nil
}
