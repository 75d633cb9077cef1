package blobtier

import "gocloud.dev/blob"

// NamedMemForTest returns the shared *blob.Bucket behind mem://name, so
// tests can plant objects at rest in it.
func NamedMemForTest(name string) *blob.Bucket {
	memMu.Lock()
	defer memMu.Unlock()
	return memNamed[name]
}

// CASModeForTest reports the compare-and-swap mode New found.
func CASModeForTest(b Bucket) string {
	if t, ok := b.(*bucket); ok {
		return t.cas.String()
	}
	return "not a *bucket"
}
