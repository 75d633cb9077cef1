package tailbatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
)

// ErrBadCursor: a cursor object body (or a consumer name about to be written
// into one) does not meet the format.
var ErrBadCursor = errors.New("tailbatch: malformed cursor object")

// cursorAttempts bounds the compare-and-swap retries of WriteCursor: writers
// of one shard's cursor are its owner and, at worst, a stale owner being
// stopped, so a handful of lost races means something is wrong.
const cursorAttempts = 8

// Cursor is the body of a shard's cursor object:
// {"v":K,"shipped_through":S,"consumers":{"name":seq,…}}.
//
// V grows by one on every write so no two writes are byte-identical (an S3
// ETag is the content's MD5). ShippedThrough is the highest sequence the
// bucket held contiguously when it was written. Consumers holds every live
// consumer's ack cursor (0 for one that never acked), clamped to
// ShippedThrough by the writer. A reader must still clamp: a hand-edited or
// foreign object may point further.
type Cursor struct {
	V              uint64
	ShippedThrough uint64
	Consumers      map[string]uint64
	// Deleted holds the tombstones (docs/FORMAT.md §6.6): consumers deleted
	// whose ConsumerDelete frame may be positioned at or after the frame of
	// event ShippedThrough, each with a sequence T such that the frame is
	// positioned at or before event T. A restore takes a tombstoned
	// consumer's frames after event ShippedThrough as older than the
	// object unless a ConsumerDelete of it comes first (see tombstone.go).
	// Empty (nil) is written as no field at all.
	Deleted map[string]uint64
	// Repaired is set by WriteCursor when the stored object was damaged
	// (failed verification or did not decode) and this write replaced it.
	Repaired bool
}

// cursorBody fixes the field names and order of the encoding.
type cursorBody struct {
	V              uint64            `json:"v"`
	ShippedThrough uint64            `json:"shipped_through"`
	Consumers      map[string]uint64 `json:"consumers"`
	Deleted        map[string]uint64 `json:"deleted,omitempty"`
}

// EncodeCursor returns the compact JSON body of c. Consumers are written in
// name order (so equal cursors encode equally); a nil map is written as {}.
func EncodeCursor(c Cursor) ([]byte, error) {
	cons := make(map[string]uint64, len(c.Consumers))
	for name, seq := range c.Consumers {
		if err := checkConsumerName(name); err != nil {
			return nil, err
		}
		cons[name] = seq
	}
	var dels map[string]uint64
	for name, seq := range c.Deleted {
		if err := checkConsumerName(name); err != nil {
			return nil, err
		}
		if _, ok := cons[name]; ok {
			return nil, fmt.Errorf("%w: consumer %q both live and deleted", ErrBadCursor, name)
		}
		if dels == nil {
			dels = make(map[string]uint64, len(c.Deleted))
		}
		dels[name] = seq
	}
	// Names are [A-Za-z0-9_-]+, so encoding/json needs no escaping and the
	// output is exactly the compact form.
	return json.Marshal(cursorBody{V: c.V, ShippedThrough: c.ShippedThrough, Consumers: cons, Deleted: dels})
}

// DecodeCursor parses a cursor object body strictly: one JSON object whose
// "v" and "shipped_through" are present unsigned integers, whose optional
// "consumers" is an object mapping valid consumer names (each at most once)
// to unsigned integers; field names match exactly; unknown fields are
// ignored (forward compatibility); nothing may follow the object.
func DecodeCursor(data []byte) (Cursor, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := expectDelim(dec, '{'); err != nil {
		return Cursor{}, err
	}
	c := Cursor{Consumers: map[string]uint64{}}
	var haveV, haveS, haveC, haveD bool
	for dec.More() {
		name, err := objectKey(dec)
		if err != nil {
			return Cursor{}, err
		}
		switch name {
		case "v":
			if haveV {
				return Cursor{}, fmt.Errorf("%w: field %q twice", ErrBadCursor, name)
			}
			haveV = true
			if c.V, err = uintValue(dec, name); err != nil {
				return Cursor{}, err
			}
		case "shipped_through":
			if haveS {
				return Cursor{}, fmt.Errorf("%w: field %q twice", ErrBadCursor, name)
			}
			haveS = true
			if c.ShippedThrough, err = uintValue(dec, name); err != nil {
				return Cursor{}, err
			}
		case "consumers":
			if haveC {
				return Cursor{}, fmt.Errorf("%w: field %q twice", ErrBadCursor, name)
			}
			haveC = true
			if err := decodeConsumers(dec, c.Consumers); err != nil {
				return Cursor{}, err
			}
		case "deleted":
			if haveD {
				return Cursor{}, fmt.Errorf("%w: field %q twice", ErrBadCursor, name)
			}
			haveD = true
			c.Deleted = map[string]uint64{}
			if err := decodeConsumers(dec, c.Deleted); err != nil {
				return Cursor{}, err
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return Cursor{}, fmt.Errorf("%w: field %q: %v", ErrBadCursor, name, err)
			}
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return Cursor{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return Cursor{}, fmt.Errorf("%w: data after the object", ErrBadCursor)
	}
	if !haveV || !haveS {
		return Cursor{}, fmt.Errorf("%w: \"v\" and \"shipped_through\" are required", ErrBadCursor)
	}
	for name := range c.Deleted {
		if _, ok := c.Consumers[name]; ok {
			return Cursor{}, fmt.Errorf("%w: consumer %q both live and deleted", ErrBadCursor, name)
		}
	}
	return c, nil
}

func decodeConsumers(dec *json.Decoder, into map[string]uint64) error {
	if err := expectDelim(dec, '{'); err != nil {
		return fmt.Errorf("consumers: %w", err)
	}
	for dec.More() {
		name, err := objectKey(dec)
		if err != nil {
			return err
		}
		if err := checkConsumerName(name); err != nil {
			return err
		}
		if _, dup := into[name]; dup {
			return fmt.Errorf("%w: consumer %q twice", ErrBadCursor, name)
		}
		seq, err := uintValue(dec, "consumers."+name)
		if err != nil {
			return err
		}
		into[name] = seq
	}
	return expectDelim(dec, '}')
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadCursor, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("%w: want %q, found %v", ErrBadCursor, want, tok)
	}
	return nil
}

func objectKey(dec *json.Decoder) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadCursor, err)
	}
	name, ok := tok.(string)
	if !ok {
		return "", fmt.Errorf("%w: want a field name, found %v", ErrBadCursor, tok)
	}
	return name, nil
}

func uintValue(dec *json.Decoder, field string) (uint64, error) {
	tok, err := dec.Token()
	if err != nil {
		return 0, fmt.Errorf("%w: field %q: %v", ErrBadCursor, field, err)
	}
	num, ok := tok.(json.Number)
	if !ok {
		return 0, fmt.Errorf("%w: field %q is %v, not an unsigned integer", ErrBadCursor, field, tok)
	}
	n, err := strconv.ParseUint(string(num), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: field %q is %s, not an unsigned 64-bit integer", ErrBadCursor, field, num)
	}
	return n, nil
}

// checkConsumerName applies the store's identifier rule: [A-Za-z0-9_-]+,
// 1 to 256 bytes (stored names are already trimmed).
func checkConsumerName(name string) error {
	if len(name) == 0 || len(name) > localseg.MaxIDLen {
		return fmt.Errorf("%w: consumer name of %d bytes (want 1..%d)", ErrBadCursor, len(name), localseg.MaxIDLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("%w: consumer name %q has a character outside [A-Za-z0-9_-]", ErrBadCursor, name)
		}
	}
	return nil
}

// CursorStore is what reading and writing the cursor object needs.
// blobtier.Bucket implements it.
type CursorStore interface {
	GetVersioned(ctx context.Context, key string) ([]byte, blobtier.Version, error)
	CompareAndSwap(ctx context.Context, key string, data []byte, expect blobtier.Version) error
	Put(ctx context.Context, key string, data []byte) error
	CanCAS() bool
}

// CursorReader reads the cursor object. blobtier.Bucket implements it.
type CursorReader interface {
	GetVersioned(ctx context.Context, key string) ([]byte, blobtier.Version, error)
}

// ReadCursor returns shard's cursor object and its version token. An absent
// object is the zero Cursor (V 0, which no written object has) with version
// "" and no error. A body that does not decode is an error matching
// ErrBadCursor.
func ReadCursor(ctx context.Context, b CursorReader, shard uint32) (Cursor, blobtier.Version, error) {
	key := blobtier.CursorKey(shard)
	data, ver, err := b.GetVersioned(ctx, key)
	if errors.Is(err, blobtier.ErrNotFound) {
		return Cursor{Consumers: map[string]uint64{}}, "", nil
	}
	if err != nil {
		// A damaged object's version comes back with the error, so the
		// owner can replace it.
		return Cursor{}, ver, fmt.Errorf("tailbatch: read cursor object %s: %w", key, err)
	}
	c, err := DecodeCursor(data)
	if err != nil {
		return Cursor{}, ver, fmt.Errorf("tailbatch: cursor object %s: %w", key, err)
	}
	return c, ver, nil
}

// WriteCursor writes shard's cursor object after a tail put succeeded:
// shipped_through is the larger of shippedThrough and the stored value (it
// never moves backward, also under a concurrent writer), V is the stored V
// plus one, and consumers holds every consumer given (nil map: none), each
// clamped to the written shipped_through so a cursor never points past what
// the bucket holds. On a bucket with compare-and-swap the write is
// conditional on the version read and retried with jitter when it loses a
// race; on one without (mem://, file://) it is a plain put by the single
// owner. A stored object that is damaged (it fails verification or does not
// decode) is replaced by this write (Cursor.Repaired), because a damaged
// cursor object would otherwise stop every later write and every restore.
//
// The stored object's tombstones of deleted consumers are carried (see
// tombstone.go); WriteCursor knows no store tip, so it makes no new one
// (Replicate does).
func WriteCursor(ctx context.Context, b CursorStore, shard uint32, shippedThrough uint64, consumers map[string]uint64) (Cursor, error) {
	return writeCursor(ctx, b, shard, shippedThrough, consumers, nil, noTip)
}

// writeCursor is WriteCursor; seen are further consumers the writer knew
// alive or deleted since the stored object was written (see tombstones),
// and tip bounds the position of every ConsumerDelete frame written so far
// (noTip: unknown).
func writeCursor(ctx context.Context, b CursorStore, shard uint32, shippedThrough uint64, consumers, seen map[string]uint64, tip uint64) (Cursor, error) {
	for name := range consumers {
		if err := checkConsumerName(name); err != nil {
			return Cursor{}, fmt.Errorf("tailbatch: shard %d cursor object: %w", shard, err)
		}
	}
	key := blobtier.CursorKey(shard)
	cas := b.CanCAS()
	var lastErr error
	for attempt := range cursorAttempts {
		if attempt > 0 {
			if err := sleepJitter(ctx, attempt); err != nil {
				return Cursor{}, fmt.Errorf("tailbatch: write cursor object %s: %w (after %v)", key, err, lastErr)
			}
		}
		old, ver, err := ReadCursor(ctx, b, shard)
		repair := false
		if err != nil {
			if !damaged(err) || (cas && ver == "") {
				return Cursor{}, err
			}
			// The stored object is damaged (bit rot, a corrupt write). The
			// owner replaces it with what it knows: the bucket holds its
			// shipped position, and its consumers are current. V restarts
			// from the clock so it stays above any counter it replaces.
			repair = true
			old = Cursor{V: uint64(time.Now().UnixNano())}
		}
		c := Cursor{V: old.V + 1, ShippedThrough: max(old.ShippedThrough, shippedThrough), Consumers: make(map[string]uint64, len(consumers)), Repaired: repair}
		for name, seq := range consumers {
			c.Consumers[name] = min(seq, c.ShippedThrough)
		}
		c.Deleted = tombstones(old, consumers, seen, tip, c.ShippedThrough)
		data, err := EncodeCursor(c)
		if err != nil {
			return Cursor{}, fmt.Errorf("tailbatch: shard %d cursor object: %w", shard, err)
		}
		if !cas {
			if err := b.Put(ctx, key, data); err != nil {
				return Cursor{}, fmt.Errorf("tailbatch: write cursor object %s: %w", key, err)
			}
			return c, nil
		}
		err = b.CompareAndSwap(ctx, key, data, ver)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, blobtier.ErrPrecondition) {
			return Cursor{}, fmt.Errorf("tailbatch: write cursor object %s: %w", key, err)
		}
		lastErr = err
	}
	return Cursor{}, fmt.Errorf("tailbatch: write cursor object %s: lost %d compare-and-swap races: %w", key, cursorAttempts, lastErr)
}

// sleepJitter waits a random 1..10×attempt milliseconds, so two writers that
// lost to each other do not retry in lockstep.
func sleepJitter(ctx context.Context, attempt int) error {
	d := time.Duration(1+rand.IntN(10*attempt)) * time.Millisecond
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// damaged reports whether a cursor read failed because the stored object is
// damaged, as opposed to the bucket failing.
func damaged(err error) bool {
	return errors.Is(err, blobtier.ErrCorrupt) || errors.Is(err, ErrBadCursor)
}
