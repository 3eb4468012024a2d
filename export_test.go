package redlock

// LeadershipLock returns the Lock that holds a leadership's key now, for
// the nemesis's recorder, which follows Locks by their handles.
func LeadershipLock(ld *Leadership) *Lock { return ld.lock() }
