// Package targets holds the logs the bench compares and the two physical
// limits they are measured against, behind one small interface each: an
// Appender for durable-append throughput and a System for building, opening
// and replaying a store of N events.
//
// Every Append of every target returns only after the record is on stable
// storage (fsync or fdatasync has returned), and every target counts what it
// holds by reading its own log back, so the driver can check that no append
// was lost or double-counted.
package targets

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"strconv"
)

// Payload is one payload in both forms the targets take, made once so no
// target pays a conversion the others do not.
type Payload struct {
	B []byte
	S string
}

// MakePayload returns a deterministic ASCII payload of size bytes. ASCII
// letters and digits need no JSON escaping, so bucketlog's frame carries the
// payload at its own length.
func MakePayload(size int) Payload {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	r := rand.New(rand.NewPCG(uint64(size), 0x5eed))
	b := make([]byte, size)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return Payload{B: b, S: string(b)}
}

// ExecIDs returns n execution ids "exec-00000", "exec-00001", ….
func ExecIDs(n int) []string {
	if n < 1 {
		n = 1
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("exec-%05d", i)
	}
	return ids
}

// TxnID is the transaction id the bench gives event seq.
func TxnID(seq uint64) string { return "txn-" + strconv.FormatUint(seq, 10) }

// LimitRecord builds the record the physical-limit loops write: a frame laid
// out as docs/FORMAT.md §2.1 describes (magic, length, CRC-32 of the body, then the JSON
// body of an Event), encoded here by hand so the limits do not depend on the
// code under test. Its length is what bucketlog writes for the same payload
// at a seven-digit sequence, so the loops move the same bytes per append.
func LimitRecord(p Payload) []byte {
	body := []byte(`{"Event":{"global_sequence":1000000,"execution_id":"exec-00042","transaction_id":"txn-1000000","payload":"`)
	body = append(body, p.B...)
	body = append(body, `"}}`...)
	rec := make([]byte, 12, 12+len(body))
	binary.LittleEndian.PutUint32(rec[0:], 0xE5DB0001)
	binary.LittleEndian.PutUint32(rec[4:], uint32(len(body)))
	binary.LittleEndian.PutUint32(rec[8:], crc32.ChecksumIEEE(body))
	return append(rec, body...)
}
