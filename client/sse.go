package client

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// sseBuffer is the stream reader's buffer: one read(2) takes up to this
// much of what the server wrote (a busy stream's publication is tens of
// KiB), and a line longer than it is gathered in a buffer of its own.
const sseBuffer = 64 << 10

// sseEvent is one dispatched Server-Sent Event. Its fields are the
// reader's buffers: valid until the callback returns.
type sseEvent struct{ id, name, data []byte }

// readSSE parses a text/event-stream (the WHATWG event-stream format):
// "field: value" lines (CRLF or LF), a blank line dispatches, ":" starts
// a comment, data lines join with "\n". It returns fn's first error, or
// nil at EOF. It allocates per connection, not per line or event: the
// lines are read in place (a longer one gathered in a reused buffer) and
// the event's fields kept in reused buffers.
func readSSE(r io.Reader, fn func(sseEvent) error) error {
	br := bufio.NewReaderSize(r, sseBuffer)
	var long []byte // a line longer than the buffer
	var ev sseEvent
	var hasData bool
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				if len(long)+len(line) > maxAnswer {
					return fmt.Errorf("%w: stream: a line over %d bytes", ErrUnavailable, maxAnswer)
				}
				long = append(long, line...)
			}
			line = long
		}
		if err != nil {
			// A last line without its end dispatches nothing.
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("%w: stream: %v", ErrUnavailable, err)
		}
		line = bytes.TrimSuffix(line[:len(line)-1], []byte{'\r'})
		if len(line) == 0 {
			if hasData || len(ev.id) > 0 {
				if err := fn(ev); err != nil {
					return err
				}
			}
			ev.id, ev.name, ev.data, hasData = ev.id[:0], ev.name[:0], ev.data[:0], false
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte{':'})
		value = bytes.TrimPrefix(value, []byte{' '})
		switch string(field) {
		case "id":
			ev.id = append(ev.id[:0], value...)
		case "event":
			ev.name = append(ev.name[:0], value...)
		case "data":
			if hasData {
				ev.data = append(ev.data, '\n')
			}
			ev.data, hasData = append(ev.data, value...), true
		}
	}
}

// parseSeq is an event id as a sequence (decimal digits only).
func parseSeq(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (1<<64-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// decodeRecord is a streamed event's data as a Record, exactly as
// json.Unmarshal reads it. serve's framing (its field order, no spaces,
// strings without escapes) is read in place with one allocation for the
// three strings; anything else goes to encoding/json.
func decodeRecord(b []byte) (Record, error) {
	if r, ok := decodeRecordFast(b); ok {
		return r, nil
	}
	var r Record
	err := json.Unmarshal(b, &r)
	return r, err
}

func decodeRecordFast(b []byte) (Record, bool) {
	var r Record
	rest, ok := bytes.CutPrefix(b, []byte(`{"global_sequence":`))
	if !ok {
		return r, false
	}
	var seq, n uint64
	var exec, tx, payload []byte
	if seq, rest, ok = fastUint(rest, 1<<64-1); !ok {
		return r, false
	}
	if exec, rest, ok = fastString(rest, `,"execution_id":`); !ok {
		return r, false
	}
	if tx, rest, ok = fastString(rest, `,"transaction_id":`); !ok {
		return r, false
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"byte_len":`)); !ok {
		return r, false
	}
	if n, rest, ok = fastUint(rest, 1<<63-1); !ok {
		return r, false
	}
	if payload, rest, ok = fastString(rest, `,"payload":`); !ok || string(rest) != "}" {
		return r, false
	}
	var sb strings.Builder
	sb.Grow(len(exec) + len(tx) + len(payload))
	sb.Write(exec)
	sb.Write(tx)
	sb.Write(payload)
	s := sb.String()
	i, j := len(exec), len(exec)+len(tx)
	r = Record{Sequence: seq, ExecutionID: s[:i], TransactionID: s[i:j], ByteLen: int(n), Payload: s[j:]}
	return r, true
}

// fastUint reads a JSON number that is a plain decimal integer ≤ limit
// (no sign, fraction, exponent or leading zero).
func fastUint(b []byte, limit uint64) (uint64, []byte, bool) {
	i := 0
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if i == 0 || (i > 1 && b[0] == '0') {
		return 0, b, false
	}
	n, ok := parseSeq(b[:i])
	if !ok || n > limit {
		return 0, b, false
	}
	return n, b[i:], true
}

// fastString reads key then a JSON string without escapes or control
// characters, in valid UTF-8 (json.Unmarshal would rewrite or refuse
// anything else).
func fastString(b []byte, key string) ([]byte, []byte, bool) {
	rest, ok := bytes.CutPrefix(b, []byte(key))
	if !ok || len(rest) == 0 || rest[0] != '"' {
		return nil, b, false
	}
	rest = rest[1:]
	ascii := true
	for i, c := range rest {
		switch {
		case c == '"':
			if !ascii && !utf8.Valid(rest[:i]) {
				return nil, b, false
			}
			return rest[:i], rest[i+1:], true
		case c == '\\' || c < 0x20:
			return nil, b, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, b, false
}
