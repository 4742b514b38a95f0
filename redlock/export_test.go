package redlock

// Waiting reports how many of l's Acquire calls wait for resource.
func Waiting(l *Locker, resource string) int {
	l.hub.mu.Lock()
	defer l.hub.mu.Unlock()
	if kw := l.hub.keys[l.Key(resource)]; kw != nil {
		return len(kw.queue)
	}
	return 0
}
