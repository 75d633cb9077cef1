package localseg

// SetUnsafeHealUnverified turns on the RED control's unverified healing (a
// copy is used without checking it against the record) and returns its
// undo.
func SetUnsafeHealUnverified() func() {
	unsafeHealUnverified.Store(true)
	return func() { unsafeHealUnverified.Store(false) }
}
