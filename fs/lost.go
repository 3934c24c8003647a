package fs

import "sync"

// lostTable holds, per inode, the error that made its buffered writes be
// dropped at the last release (the flush failed, ENOSPC say, and no handle
// was left to retry it): the next fsync of the inode returns it, once.
// Bounded like the ghosts; in memory only.
type lostTable struct {
	mu sync.Mutex
	m  map[uint64]error
}

func (l *lostTable) add(ino uint64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[uint64]error{}
	}
	if len(l.m) >= maxGhosts {
		for k := range l.m {
			delete(l.m, k)
			break
		}
	}
	l.m[ino] = err
}

// take returns and forgets ino's lost-write error, if any.
func (l *lostTable) take(ino uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.m[ino]
	if err != nil {
		delete(l.m, ino)
	}
	return err
}
