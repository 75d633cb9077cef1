package main

import (
	"net/http"
	"strconv"

	"github.com/bucketlog/bucketlog/localseg"
)

// The append hot path (POST /v1/events) without reflection. scanEvents
// takes only the common shape of a body — events whose keys are exactly
// execution_id, transaction_id and payload, each once and spelt without
// escapes, whose values are strings without escapes or control characters
// — and for any other body says so, and the strict general path
// (parseEventsStrict) decides, with its own messages. So a body the fast
// path takes is one the strict path takes with the same events (the
// differential test in serve_fastjson_test.go holds the two together), and
// the refusals (duplicate or differently-cased keys, unknown fields,
// trailing data, lone surrogates) are the strict path's alone.

// isSpace is JSON whitespace.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// plainString reads the JSON string at b[i] (which must be '"') with no
// escape and no control character, and returns its content's bounds and
// the index after the closing quote.
func plainString(b []byte, i int) (start, end, next int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, 0, 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return i + 1, j, j + 1, true
		case c == '\\' || c < 0x20:
			return 0, 0, 0, false
		}
	}
	return 0, 0, 0, false
}

// scanEvent reads one event object at b[i] in the common shape and returns
// it (not yet validated) and the index after its closing brace.
func scanEvent(b []byte, i int) (ev localseg.Event, next int, ok bool) {
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != '{' {
		return ev, 0, false
	}
	var seen [3]bool
	i++
	for {
		i = skipSpace(b, i)
		ks, ke, n, ok := plainString(b, i)
		if !ok {
			return ev, 0, false
		}
		i = skipSpace(b, n)
		if i >= len(b) || b[i] != ':' {
			return ev, 0, false
		}
		i = skipSpace(b, i+1)
		vs, ve, n, ok := plainString(b, i)
		if !ok {
			return ev, 0, false
		}
		var f int
		switch string(b[ks:ke]) { // no allocation: a switch on the bytes
		case "execution_id":
			f = 0
		case "transaction_id":
			f = 1
		case "payload":
			f = 2
		default:
			return ev, 0, false
		}
		if seen[f] {
			return ev, 0, false
		}
		seen[f] = true
		v := string(b[vs:ve])
		switch f {
		case 0:
			ev.ExecutionID = v
		case 1:
			ev.TransactionID = v
		case 2:
			ev.Payload = v
		}
		i = skipSpace(b, n)
		if i < len(b) && b[i] == ',' {
			i++
			continue
		}
		if i < len(b) && b[i] == '}' && seen == [3]bool{true, true, true} {
			return ev, i + 1, true
		}
		return ev, 0, false
	}
}

// scanEvents reads body as one event or {"events":[…]} in the common
// shape (a batch of 1..maxBatchEvents events). ok false: not that shape.
func scanEvents(body []byte) (evs []localseg.Event, batch, ok bool) {
	if ev, n, ok := scanEvent(body, 0); ok {
		if skipSpace(body, n) != len(body) {
			return nil, false, false
		}
		return []localseg.Event{ev}, false, true
	}
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return nil, false, false
	}
	ks, ke, n, ok := plainString(body, skipSpace(body, i+1))
	if !ok || string(body[ks:ke]) != "events" {
		return nil, false, false
	}
	i = skipSpace(body, n)
	if i >= len(body) || body[i] != ':' {
		return nil, false, false
	}
	i = skipSpace(body, i+1)
	if i >= len(body) || body[i] != '[' {
		return nil, false, false
	}
	i++
	for {
		ev, n, ok := scanEvent(body, i)
		if !ok || len(evs) == maxBatchEvents {
			return nil, false, false
		}
		evs = append(evs, ev)
		i = skipSpace(body, n)
		if i < len(body) && body[i] == ',' {
			i++
			continue
		}
		if i >= len(body) || body[i] != ']' {
			return nil, false, false
		}
		break
	}
	i = skipSpace(body, i+1)
	if i >= len(body) || body[i] != '}' || skipSpace(body, i+1) != len(body) {
		return nil, false, false
	}
	return evs, true, true
}

// checkEvents validates scanned events as parseEventsStrict does: the
// store's rules and ownership, a batch's refusal naming the event.
func (a *api) checkEvents(evs []localseg.Event, batch bool) ([]localseg.Event, bool, error) {
	for i := range evs {
		ev, err := checkEvent(evs[i], a.segMax)
		if err == nil {
			err = checkOwned(a.own, ev)
		}
		if err != nil {
			if batch {
				return nil, true, errorAt(i, err)
			}
			return nil, false, err
		}
		evs[i] = ev
	}
	return evs, batch, nil
}

// plainJSON reports whether s prints as a JSON string without escapes
// (printable ASCII other than '"' and '\').
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// appendJSON encodes out as writeJSON(emptyLists(out)) does (same fields,
// order and newline), or says it cannot (an id that needs escaping).
func appendJSON(buf []byte, out appendOutput) ([]byte, bool) {
	if !plainJSON(out.Action) || !plainJSON(out.ExecutionID) {
		return nil, false
	}
	buf = append(buf, `{"action":"`...)
	buf = append(buf, out.Action...)
	buf = append(buf, `","execution_id":"`...)
	buf = append(buf, out.ExecutionID...)
	buf = append(buf, `","global_sequence":`...)
	buf = strconv.AppendUint(buf, out.GlobalSequence, 10)
	buf = append(buf, `,"byte_len":`...)
	buf = strconv.AppendInt(buf, int64(out.ByteLen), 10)
	buf = append(buf, `,"created_stream":`...)
	buf = strconv.AppendBool(buf, out.CreatedStream)
	buf = append(buf, `,"log_record_count":`...)
	buf = strconv.AppendUint(buf, out.LogRecordCount, 10)
	if out.Duplicate {
		buf = append(buf, `,"duplicate":true`...)
	}
	return append(buf, "}\n"...), true
}

// writeAppend answers a single append.
func writeAppend(w http.ResponseWriter, status int, out appendOutput) {
	var arr [256]byte
	b, ok := appendJSON(arr[:0], out)
	if !ok {
		writeBody(w, status, out)
		return
	}
	w.Header()["Content-Type"] = []string{"application/json"} // the key is canonical already
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
