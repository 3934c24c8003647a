package fs

import "sync"

// boundedMap is a small map of per-inode state that only lives in memory,
// safe for concurrent use, and bounded: past maxEntries an arbitrary entry
// goes (a safety net; its users keep entries briefly).
type boundedMap[V any] struct {
	mu sync.Mutex
	m  map[uint64]V
}

// maxEntries bounds a boundedMap.
const maxEntries = 1 << 14

func (b *boundedMap[V]) put(ino uint64, v V) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[uint64]V{}
	}
	if len(b.m) >= maxEntries {
		for k := range b.m {
			delete(b.m, k)
			break
		}
	}
	b.m[ino] = v
}

// get returns ino's entry; with take it also removes it.
func (b *boundedMap[V]) get(ino uint64, take bool) (V, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.m[ino]
	if ok && take {
		delete(b.m, ino)
	}
	return v, ok
}

// ghostTable keeps the last attributes of inodes deleted while the kernel
// may still hold their node: a process's working directory, an O_PATH
// descriptor. Until the node's FORGET the kernel may still ask for its
// attributes or open the directory, and ext4 answers with nlink 0 where
// lsmfs's record is gone (it answered ENOENT). The kernel evicts an
// unlinked node, and forgets it, as soon as nothing holds it, so ghosts are
// few and short-lived. In memory only: after a remount the kernel holds no
// node of the old mount.
type ghostTable struct{ boundedMap[inode] }

// add records n, the final record of the deleted inode ino.
func (g *ghostTable) add(ino uint64, n inode) { g.put(ino, n) }

// forget drops the ghost of ino (the kernel forgot the node).
func (g *ghostTable) forget(ino uint64) { g.get(ino, true) }

// lostTable holds, per inode, the error that made its buffered writes be
// dropped at the last release (the flush failed, ENOSPC say, and no handle
// was left to retry it): the next fsync of the inode returns it, once.
type lostTable struct{ boundedMap[error] }

func (l *lostTable) add(ino uint64, err error) { l.put(ino, err) }

// take returns and forgets ino's lost-write error, if any.
func (l *lostTable) take(ino uint64) error {
	err, _ := l.get(ino, true)
	return err
}
