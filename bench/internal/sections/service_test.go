package sections

import (
	"errors"
	"testing"
)

// TestServiceCheckCount: a cell fails when the server holds more or fewer
// events than were acknowledged, or cannot be counted (RED controls of the
// durability check run after every cell and after every restart).
func TestServiceCheckCount(t *testing.T) {
	if err := checkCount("after the cell:", 116, nil, 116); err != nil {
		t.Fatal(err)
	}
	for _, got := range []uint64{115, 117} {
		if checkCount("after the cell:", got, nil, 116) == nil {
			t.Errorf("a server holding %d of 116 acknowledged passed", got)
		}
	}
	if checkCount("after SIGKILL and restart:", 116, errors.New("refused"), 116) == nil {
		t.Error("a failed count passed")
	}
}
