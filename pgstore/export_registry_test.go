package pgstore

// UnservedDueQuery and DeadLetterUnservedQuery render the registry's
// statements that read the tasks, for EXPLAIN tests.
func UnservedDueQuery(s *Store) string        { return s.q.unservedDue }
func DeadLetterUnservedQuery(s *Store) string { return s.q.deadLetterUnserved }
