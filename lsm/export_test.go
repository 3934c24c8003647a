package lsm

// WaitCache waits until the block cache has applied every Set so far (it
// admits them asynchronously), for tests that count what it holds.
func (d *DB) WaitCache() { d.cache.Wait() }

// WaitCleaner waits until no value-log cleaning pass runs.
func (d *DB) WaitCleaner() {
	d.mu.Lock()
	for d.mu.cleaning {
		d.mu.cond.Wait()
	}
	d.mu.Unlock()
}

// SetVlogMaxOpen bounds the value-log files the engine keeps open.
func (d *DB) SetVlogMaxOpen(n int) { d.vlogR.SetMaxOpen(n) }
