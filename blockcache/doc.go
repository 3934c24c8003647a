// Package blockcache is the engine's shared cache of immutable byte slices:
// decompressed, checksum-verified SSTable blocks and value-log values. It is a
// thin wrapper over Ristretto v2 (TinyLFU admission, sampled-LFU eviction),
// sized in bytes, with hit/miss counters for `lsmfs stats`.
//
// # Model
//
// An entry is named by (file number, offset). File numbers are unique across
// the engine and never reused, and the bytes at an offset of a written file
// never change, so an entry never goes stale and nothing is ever invalidated:
// entries of deleted files simply age out.
//
// The cost of an entry is len(value) plus EntryOverhead, the Go heap an entry
// takes beyond its value (our entry header, Ristretto's store and policy
// maps; measured by TestFootprint), so the configured size bounds the cache's
// memory whatever the values' size: with 4 KiB file blocks the bookkeeping is
// 5% of the values.
//
// # Keys and collisions
//
// Ristretto does not store keys. It files an item under a 64-bit key hash and
// an optional 64-bit "conflict" hash, and with a uint64 key it performs no
// conflict check at all: two keys with the same hash would silently return
// each other's values. A 16-byte string key would be checked, but it costs
// one allocation per Get. This package does neither. The Ristretto key is a
// uint64 hash of (file, offset):
//
//	hash = mix64(offset XOR mix64(file))   // mix64: the SplitMix64 finalizer
//
// mix64 is a bijection, so within one file distinct offsets never share a
// hash; across files they collide with probability about n²/2⁶⁵ for n
// entries. Correctness does not rest on that: every stored value carries its
// own (file, offset), and Get compares both before returning it, treating a
// mismatch as a miss. A hash collision can therefore cost a miss (the two
// keys compete for one slot), never a wrong block.
//
// # Concurrency
//
// Get, Set and Metrics are safe for concurrent use. Close must not race with
// Get or Set (Ristretto panics on a Set after Close): the engine closes the
// cache after every reader that uses it. A nil *Cache is a valid, always-empty
// cache, so callers need no "cache disabled" branches.
//
// Set is asynchronous: Ristretto buffers it and may drop it under contention
// or reject it by admission policy. A Get right after a Set may miss; tests
// call Wait to make pending Sets visible.
//
// Values are shared by every reader: after Set, neither the caller nor anyone
// who got the slice from Get may modify it.
package blockcache
