package store

// Every optional capability has an accessor here, and code outside this
// package finds capabilities only through them: a capability is then
// declared in one place (this package) and in storetest.Capabilities,
// which checks it.

// Wrapper is implemented by a store that wraps another one (to instrument
// it, say, or to add methods a caller needs) and lets the accessors of this
// package see through it: Unwrap returns the wrapped store. An accessor
// asks the store it is given for the capability, then, if that store does
// not implement it and is a Wrapper, the store it wraps, and so on down
// the chain. A wrapper that implements a capability's interface itself
// serves that capability; a wrapper meant to hide a capability of the
// store it wraps must not implement Wrapper.
type Wrapper interface {
	Unwrap() Store
}

// maxUnwrap bounds the chain of wrappers an accessor follows, so that a
// wrapper unwrapping to itself cannot hang it.
const maxUnwrap = 32

// capability returns the first store of s's wrapper chain implementing T.
func capability[T any](s Store) (T, bool) {
	for range maxUnwrap {
		if s == nil {
			break
		}
		if c, ok := s.(T); ok {
			return c, true
		}
		w, ok := s.(Wrapper)
		if !ok {
			break
		}
		s = w.Unwrap()
	}
	var zero T
	return zero, false
}

// NotifierOf returns s's notifications, if s (or a store it wraps)
// implements Notifier.
func NotifierOf(s Store) (Notifier, bool) { return capability[Notifier](s) }

// AdminOf returns s's dead-letter and operations interface, if s (or a
// store it wraps) implements Admin.
func AdminOf(s Store) (Admin, bool) { return capability[Admin](s) }

// BulkChunkerOf returns s's chunk size hint, if s (or a store it wraps)
// implements BulkChunker.
func BulkChunkerOf(s Store) (BulkChunker, bool) { return capability[BulkChunker](s) }

// PauserOf returns s's queue pauses, if s (or a store it wraps) implements
// Pauser.
func PauserOf(s Store) (Pauser, bool) { return capability[Pauser](s) }

// HandlerPauserOf returns s's handler pauses, if s (or a store it wraps)
// implements HandlerPauser.
func HandlerPauserOf(s Store) (HandlerPauser, bool) { return capability[HandlerPauser](s) }

// LiveTasksOf returns s's live-task operations, if s (or a store it wraps)
// implements LiveTasks.
func LiveTasksOf(s Store) (LiveTasks, bool) { return capability[LiveTasks](s) }

// RegistryOf returns s's worker registry, if s (or a store it wraps)
// implements WorkerRegistry.
func RegistryOf(s Store) (WorkerRegistry, bool) { return capability[WorkerRegistry](s) }

// SnoozerOf returns s's snoozes, if s (or a store it wraps) implements
// Snoozer.
func SnoozerOf(s Store) (Snoozer, bool) { return capability[Snoozer](s) }

// InPlaceRetrierOf returns s's retries in place, if s (or a store it
// wraps) implements InPlaceRetrier.
func InPlaceRetrierOf(s Store) (InPlaceRetrier, bool) { return capability[InPlaceRetrier](s) }

// NotDueCounterOf returns s's count of tasks not due, if s (or a store it
// wraps) implements NotDueCounter.
func NotDueCounterOf(s Store) (NotDueCounter, bool) { return capability[NotDueCounter](s) }

// WaitingCounterOf returns s's split of waiting tasks, if s (or a store
// it wraps) implements WaitingCounter.
func WaitingCounterOf(s Store) (WaitingCounter, bool) { return capability[WaitingCounter](s) }

// GroupOriginReaderOf returns s's origins of failure groups, if s (or a
// store it wraps) implements GroupOriginReader.
func GroupOriginReaderOf(s Store) (GroupOriginReader, bool) { return capability[GroupOriginReader](s) }

// DeadHistogrammerOf returns s's dead-task histogram, if s (or a store it
// wraps) implements DeadHistogrammer.
func DeadHistogrammerOf(s Store) (DeadHistogrammer, bool) { return capability[DeadHistogrammer](s) }

// DeadGroupKeyerOf returns s's failure-group keys, if s (or a store it
// wraps) implements DeadGroupKeyer.
func DeadGroupKeyerOf(s Store) (DeadGroupKeyer, bool) { return capability[DeadGroupKeyer](s) }

// SeriesReaderOf returns s's time series of attempts, if s (or a store it
// wraps) implements SeriesReader.
func SeriesReaderOf(s Store) (SeriesReader, bool) { return capability[SeriesReader](s) }
