package lsm

// WaitCache waits until the block cache has applied every Set so far (it
// admits them asynchronously), for tests that count what it holds.
func (d *DB) WaitCache() { d.cache.Wait() }
