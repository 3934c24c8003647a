package main

import "testing"

// TestMemoryLimit: the soft limit leaves the daemon's RSS room under
// cache_size + memtable_size + 128 MiB (the runtime's memory outside the
// heap is about 16 MiB), and follows the memtables past memtable_size.
func TestMemoryLimit(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		cache, memtable int64
		mem             uint64
		want            int64
	}{
		{128 * mib, 64 * mib, 0, 304 * mib},
		{128 * mib, 64 * mib, 40 * mib, 304 * mib},
		{128 * mib, 64 * mib, 100 * mib, 340 * mib},
		{0, 64 * mib, 0, 176 * mib},
	} {
		if got := memoryLimit(c.cache, c.memtable, c.mem); got != c.want {
			t.Errorf("memoryLimit(%d MiB, %d MiB, %d MiB) = %d MiB, want %d MiB", c.cache/mib, c.memtable/mib, c.mem/mib, got/mib, c.want/mib)
		}
		if c.mem <= uint64(c.memtable) {
			if got := memoryLimit(c.cache, c.memtable, c.mem) + 16*mib; got > c.cache+c.memtable+128*mib {
				t.Errorf("limit + 16 MiB = %d MiB, over the RSS target", got/mib)
			}
		}
	}
}
