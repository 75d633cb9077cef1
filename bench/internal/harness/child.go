package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
)

// ChildFlag is the first argument that makes the bench binary run a
// registered child function instead of the harness.
const ChildFlag = "-child"

// RunChild runs the child function name in a fresh process of this binary
// with args and decodes its JSON result into v.
func (e *Env) RunChild(ctx context.Context, name string, args []string, v any) error {
	cmd := exec.CommandContext(ctx, e.Self, append([]string{ChildFlag, name}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("child %s: %w: %s", name, err, strings.TrimSpace(stderr.String()))
	}
	if err := json.Unmarshal(stdout.Bytes(), v); err != nil {
		return fmt.Errorf("child %s: decode result %q: %w", name, stdout.String(), err)
	}
	return nil
}
