package fs

import "sync"

// ghostTable keeps the last attributes of inodes deleted while the kernel
// may still hold their node: a process's working directory, an O_PATH
// descriptor. Until the node's FORGET the kernel may still ask for its
// attributes or open the directory, and ext4 answers with nlink 0 where
// lsmfs's record is gone (it answered ENOENT). The kernel evicts an
// unlinked node, and forgets it, as soon as nothing holds it, so ghosts are
// few and short-lived; the table is bounded all the same. In memory only:
// after a remount the kernel holds no node of the old mount.
type ghostTable struct {
	mu sync.Mutex
	m  map[uint64]inode
}

// maxGhosts bounds the table: past it, an arbitrary ghost goes (its node,
// if the kernel still holds it, then answers ENOENT).
const maxGhosts = 1 << 14

// add records n, the final record of the deleted inode ino.
func (g *ghostTable) add(ino uint64, n inode) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		g.m = map[uint64]inode{}
	}
	if len(g.m) >= maxGhosts {
		for k := range g.m {
			delete(g.m, k)
			break
		}
	}
	g.m[ino] = n
}

// get returns the ghost of ino, if any.
func (g *ghostTable) get(ino uint64) (inode, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n, ok := g.m[ino]
	return n, ok
}

// forget drops the ghost of ino (the kernel forgot the node).
func (g *ghostTable) forget(ino uint64) {
	g.mu.Lock()
	if len(g.m) > 0 {
		delete(g.m, ino)
	}
	g.mu.Unlock()
}
