package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/localseg"
)

// The checks here run before any store is opened, so that input the store
// would refuse never creates a shard directory, takes a lock or writes a
// byte. They apply the rules of docs/FORMAT.md §2.6; the store applies them again (it is the
// authority) and the two agree by construction of the tests.

// checkName and checkEvent are the store's own rules (localseg), applied
// before any store is opened.
func checkName(what, raw string) (string, error) { return localseg.ValidateName(what, raw) }

func checkEvent(ev localseg.Event, segMax int64) (localseg.Event, error) {
	return localseg.ValidateEvent(ev, segMax)
}

// checkOwned refuses an event of an execution own does not own, naming the
// owner, as the engine would (docs/FORMAT.md §5).
func checkOwned(own affinity.Ownership, ev localseg.Event) error {
	if owner := own.OwnerOf(ev.ExecutionID); owner != own.Index {
		return &affinity.NotOwnerError{Owner: owner, Shard: own.Index, ExecutionID: ev.ExecutionID}
	}
	return nil
}

// fileEvent is one line of an --file: every field is required (a missing
// one is not the empty string), and nothing else is allowed.
type fileEvent struct {
	ExecutionID   *string `json:"execution_id"`
	TransactionID *string `json:"transaction_id"`
	Payload       *string `json:"payload"`
}

// maxFileBytes bounds an --file (the whole batch is validated in memory
// before any of it is written).
const maxFileBytes = 1 << 30

// readEvents parses an --file: one JSON event a line; blank lines are
// skipped. Each line is checked as raw bytes first — valid UTF-8, and no
// lone surrogate escape (\ud800), which encoding/json would silently turn
// into U+FFFD — then decoded strictly (no unknown field, no trailing data)
// and validated with checkEvent. The first bad line fails the whole file,
// naming the line. An empty file is invalid input too.
// It returns the events and their line numbers.
func readEvents(r io.Reader, segMax int64) ([]localseg.Event, []int, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxFileBytes+1))
	if err != nil {
		return nil, nil, err
	}
	if len(data) > maxFileBytes {
		return nil, nil, fmt.Errorf("%w: the file is over %d bytes", localseg.ErrInvalidInput, maxFileBytes)
	}
	var evs []localseg.Event
	var lines []int
	for n, line := range bytes.Split(data, []byte("\n")) {
		lineNo := n + 1
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		ev, err := parseEventLine(line, segMax)
		if err != nil {
			return nil, nil, fmt.Errorf("line %d: %w", lineNo, err)
		}
		evs = append(evs, ev)
		lines = append(lines, lineNo)
	}
	if len(evs) == 0 {
		return nil, nil, fmt.Errorf("%w: the file holds no event (one JSON object a line)", localseg.ErrInvalidInput)
	}
	return evs, lines, nil
}

func parseEventLine(line []byte, segMax int64) (localseg.Event, error) {
	if !utf8.Valid(line) {
		return localseg.Event{}, fmt.Errorf("%w: not valid UTF-8 (refused, never altered)", localseg.ErrInvalidInput)
	}
	if err := checkSurrogates(line); err != nil {
		return localseg.Event{}, err
	}
	vals, err := strictObject(line, "event", "execution_id", "transaction_id", "payload")
	if err != nil {
		return localseg.Event{}, err
	}
	var fe fileEvent
	for _, f := range []struct {
		name string
		dst  **string
	}{{"execution_id", &fe.ExecutionID}, {"transaction_id", &fe.TransactionID}, {"payload", &fe.Payload}} {
		raw, ok := vals[f.name]
		if !ok {
			return localseg.Event{}, fmt.Errorf("%w: missing %s", localseg.ErrInvalidInput, f.name)
		}
		var v string
		if raw[0] != '"' || json.Unmarshal(raw, &v) != nil {
			return localseg.Event{}, fmt.Errorf("%w: %s must be a JSON string, not %s (to store a JSON document, send it encoded as a string)", localseg.ErrInvalidInput, f.name, jsonKind(raw))
		}
		*f.dst = &v
	}
	return checkEvent(localseg.Event{ExecutionID: *fe.ExecutionID, TransactionID: *fe.TransactionID, Payload: *fe.Payload}, segMax)
}

// strictObject reads data as exactly one JSON object and returns its
// members' raw values by key. Stricter than encoding/json, which keeps the
// last of duplicate keys and matches keys case-insensitively: every key
// must be one of allowed, spelt exactly, and given once; nothing may follow
// the object. what names the object in messages.
func strictObject(data []byte, what string, allowed ...string) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("%w: malformed JSON: %v (want one %s object)", localseg.ErrInvalidInput, err, what)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("%w: the %s is not a JSON object", localseg.ErrInvalidInput, what)
	}
	vals := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: malformed JSON: %v", localseg.ErrInvalidInput, err)
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("%w: malformed JSON: %v", localseg.ErrInvalidInput, err)
		}
		if _, dup := vals[key]; dup {
			return nil, fmt.Errorf("%w: the %s gives %q twice (a key may appear once)", localseg.ErrInvalidInput, what, key)
		}
		if !slices.Contains(allowed, key) {
			for _, a := range allowed {
				if strings.EqualFold(a, key) {
					return nil, fmt.Errorf("%w: the %s has key %q; keys are case-sensitive (want %q)", localseg.ErrInvalidInput, what, key, a)
				}
			}
			return nil, fmt.Errorf("%w: the %s has unknown key %q (want %s)", localseg.ErrInvalidInput, what, key, strings.Join(allowed, ", "))
		}
		vals[key] = raw
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, fmt.Errorf("%w: malformed JSON: %v", localseg.ErrInvalidInput, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: malformed JSON: data after the %s object", localseg.ErrInvalidInput, what)
	}
	return vals, nil
}

// jsonKind names the kind of a raw JSON value, for messages.
func jsonKind(raw json.RawMessage) string {
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	case '"':
		return "a string"
	}
	return "a number"
}

// checkSurrogates refuses a \u escape of a UTF-16 surrogate that is not
// half of a pair (a high one followed by a low one). encoding/json decodes
// such an escape to U+FFFD, which would store a payload other than the one
// sent. Backslashes occur only inside strings in valid JSON, and an
// escaped backslash is skipped whole, so no string tracking is needed;
// invalid JSON is left for the decoder to refuse.
func checkSurrogates(b []byte) error {
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if i+1 >= len(b) || b[i+1] != 'u' {
			i++ // \" \\ \/ \b \f \n \r \t
			continue
		}
		r, ok := hex4(b, i+2)
		if !ok {
			i++
			continue
		}
		switch {
		case r >= 0xD800 && r <= 0xDBFF:
			lo, ok := rune(0), false
			if i+11 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
				lo, ok = hex4(b, i+8)
			}
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return fmt.Errorf("%w: lone surrogate escape %s at byte %d (not valid Unicode; JSON decoding would replace it with U+FFFD)", localseg.ErrInvalidInput, b[i:i+6], i)
			}
			i += 11
		case r >= 0xDC00 && r <= 0xDFFF:
			return fmt.Errorf("%w: lone surrogate escape %s at byte %d (not valid Unicode; JSON decoding would replace it with U+FFFD)", localseg.ErrInvalidInput, b[i:i+6], i)
		default:
			i += 5
		}
	}
	return nil
}

// hex4 decodes the four hex digits at b[i:i+4].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
