package redisstore

// SetCountBudget sets the entries one count script examines, for the
// tests of a walk over several scripts, and returns a function restoring
// it.
func SetCountBudget(n int) func() {
	old := countBudget
	countBudget = n
	return func() { countBudget = old }
}
