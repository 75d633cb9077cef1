// Package redcontrol holds the switches that RED controls flip to turn one
// safety rule off, so that a test can show its oracle fails without it.
// Production code only reads them; nothing but a RED control test sets
// one, and every switch is off unless set. It imports nothing of ours (a
// leaf), and its switches are safe for concurrent use.
package redcontrol

import "sync/atomic"

// IndexObjectsUnchecked: a store uses every index object it fetches
// without the trust rule (localseg indexobj.go; docs/FORMAT.md §6.10):
// one that describes another segment is taken for the evicted one.
var IndexObjectsUnchecked atomic.Bool
