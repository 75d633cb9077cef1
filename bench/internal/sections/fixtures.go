package sections

import (
	"fmt"
	"time"

	"github.com/bucketlog/bucketlog/bench/internal/harness"
	"github.com/bucketlog/bucketlog/bench/internal/targets"
)

// StorePayload is the payload size of the stores the open, replay and
// memory sections read.
const StorePayload = 256

// storeFixture returns the directory of sys's store of n events of
// StorePayload bytes over env.Executions execution ids, building it the
// first time any section asks in this run.
func storeFixture(env *harness.Env, sys targets.System, n int) (string, error) {
	key := fmt.Sprintf("%s/n=%d/p=%d/x=%d", sys.Name, n, StorePayload, env.Executions)
	return env.Fixtures.Get(key, func(dir string) error {
		p := targets.MakePayload(StorePayload)
		t0 := time.Now()
		if err := sys.Build(dir, n, &p, env.Executions); err != nil {
			return err
		}
		env.Logf("built %s in %v", key, time.Since(t0).Round(time.Millisecond))
		return nil
	})
}
