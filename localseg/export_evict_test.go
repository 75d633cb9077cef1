package localseg

// SetUnsafeEvictAny turns on the RED control's unsafe eviction (no durable
// check) and returns its undo.
func SetUnsafeEvictAny(on bool) func() {
	unsafeEvictAny.Store(on)
	return func() { unsafeEvictAny.Store(false) }
}
