package redlock

// LeadershipLock returns the Lock a leadership is, for the nemesis's
// recorder, which follows Locks by their handles.
func LeadershipLock(ld *Leadership) *Lock { return ld.l }
