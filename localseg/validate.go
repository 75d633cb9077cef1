package localseg

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/bucketlog/bucketlog/frame"
)

// validEvent is an event that passed validation, with its execution id
// trimmed, and the length of its frame once a sequence is assigned.
type validEvent struct {
	exec, txn, payload string
	// lenNoSeq is the frame length without the digits of the sequence,
	// which is assigned later, under the store's lock.
	lenNoSeq int64
	// escTxn and escPayload say the string needs escaping: the frame is
	// encoded under the store's lock, where a string that needs none is
	// copied without being scanned again (an execution id never does).
	escTxn, escPayload bool
	// key and content are the event's hashes in the transaction window
	// (txwindow.go), set by txWindow.hash outside the store's mutex.
	key     txKey
	content uint64
	hashed  bool
}

// appendFrame appends the event's frame with sequence seq.
func (v *validEvent) appendFrame(dst []byte, seq uint64) []byte {
	return frame.AppendEventEscaped(dst, seq, v.exec, v.txn, v.escTxn, v.payload, v.escPayload)
}

// frameLen is the length of the event's frame with sequence seq.
func (v *validEvent) frameLen(seq uint64) int64 { return v.lenNoSeq + int64(frame.DecimalLen(seq)) }

// quoteShort quotes s for an error message, cut so a huge bad input does not
// become a huge error.
func quoteShort(s string) string {
	const max = 64
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return fmt.Sprintf("%q…", s[:cut])
	}
	return fmt.Sprintf("%q", s)
}

// validateName trims an execution id or consumer name and checks it against
// [A-Za-z0-9_-]{1,256}.
func validateName(what, raw string) (string, error) {
	s := strings.TrimSpace(raw)
	switch {
	case s == "":
		return "", fmt.Errorf("%w: %s is empty", ErrInvalidInput, what)
	case len(s) > MaxIDLen:
		return "", fmt.Errorf("%w: %s is %d bytes, over the %d-byte limit", ErrInvalidInput, what, len(s), MaxIDLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return "", fmt.Errorf("%w: %s %s: only A-Z, a-z, 0-9, '_' and '-' are allowed", ErrInvalidInput, what, quoteShort(s))
		}
	}
	return s, nil
}

// validateEvent checks ev against docs/FORMAT.md §2.6 and returns it ready to encode.
// The frame length (against the segment cap) is checked by the caller once
// the sequence is known; tooLarge builds that error.
func validateEvent(ev *Event) (validEvent, error) {
	exec, err := validateName("execution_id", ev.ExecutionID)
	if err != nil {
		return validEvent{}, err
	}
	switch txn := ev.TransactionID; {
	case !utf8.ValidString(txn):
		return validEvent{}, fmt.Errorf("%w: transaction_id is not valid UTF-8", ErrInvalidInput)
	case strings.TrimSpace(txn) == "":
		return validEvent{}, fmt.Errorf("%w: transaction_id is blank", ErrInvalidInput)
	case len(txn) > MaxTransactionIDLen:
		return validEvent{}, fmt.Errorf("%w: transaction_id is %d bytes, over the %d-byte limit", ErrInvalidInput, len(txn), MaxTransactionIDLen)
	}
	if !utf8.ValidString(ev.Payload) {
		return validEvent{}, fmt.Errorf("%w: payload is not valid UTF-8 (it is refused, never altered)", ErrInvalidInput)
	}
	v := validEvent{exec: exec, txn: ev.TransactionID, payload: ev.Payload}
	txnLen, payloadLen := frame.EscapedLen(v.txn), frame.EscapedLen(v.payload)
	v.escTxn, v.escPayload = txnLen != int64(len(v.txn)), payloadLen != int64(len(v.payload))
	v.lenNoSeq = int64(frame.EventFixedLen+len(v.exec)) + txnLen + payloadLen
	return v, nil
}

func tooLarge(n, maxFrame int64) error {
	return fmt.Errorf("%w: its frame would be %d bytes, over the segment cap of %d", ErrTooLarge, n, maxFrame)
}

// ValidateName applies the identifier rule of docs/FORMAT.md §2.6 to an execution id or
// consumer name — after trimming, 1–256 bytes of [A-Za-z0-9_-] — and
// returns it trimmed, as the store keeps it.
func ValidateName(what, raw string) (string, error) { return validateName(what, raw) }

// ValidateEvent checks ev as Append will, without a store: identifiers,
// UTF-8, and the frame's size against segmentMaxBytes at the smallest
// sequence (a frame only grows with its sequence's digits; Append checks
// the exact length again). It returns ev with its execution id trimmed.
// Callers use it to refuse bad input before opening anything.
func ValidateEvent(ev Event, segmentMaxBytes int64) (Event, error) {
	v, err := validateEvent(&ev)
	if err != nil {
		return ev, err
	}
	ev.ExecutionID = v.exec
	if n := v.frameLen(1); segmentMaxBytes > 0 && n > segmentMaxBytes {
		return ev, tooLarge(n, segmentMaxBytes)
	}
	return ev, nil
}
