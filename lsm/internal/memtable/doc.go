// Package memtable holds the engine's in-memory write buffer: an arena-backed
// skiplist of internal keys (one writer, any number of concurrent readers) plus
// a second skiplist for range tombstones in the same arena.
//
// Concurrency model: exactly one goroutine calls Add at a time (the engine's
// commit path serializes writers); readers (Get, iterators, tombstone lookups)
// run concurrently with it and with each other without locks. A node is fully
// written before it is linked, and links are published with atomic stores, so a
// reader sees either the old or the new list, never a half-built node.
//
// Memory: keys, values and nodes live in one []byte arena that holds no Go
// pointers, so the garbage collector never scans it. The arena has a fixed
// capacity; Add reports ErrFull when an entry does not fit, and the engine then
// rotates to a new memtable. Arena layout of a node:
//
//	+-----------+-----------+-----------+-------------+------------+----------------------+-----+-------+
//	| keyOff u32| keyLen u32| valLen u32| height (4B) | prefix u64 | next[height] u32 ... | key | value |
//	+-----------+-----------+-----------+-------------+------------+----------------------+-----+-------+
//
// prefix holds the user key's first 8 bytes (zero-padded, big-endian) so that
// most comparisons during a search read one integer from the node instead of
// following the key offset.
//
// Offsets are arena offsets; 0 is nil (the arena's first bytes are reserved).
//
// Each segment, skiplist or Flat, also keeps a Bloom filter of its user keys
// (filter.go, outside the arena), so Get skips a segment that cannot hold the
// key. Bits are set before an entry is linked; the filter never hides one.
//
// A skiplist segment also keeps a hash index from each user key to the node
// of its newest entry (index.go, outside the arena: 8 bytes a slot, a
// seventh of the arena's size, counted in the segment's memory), so Get of a
// key the segment holds costs a few cache misses instead of a search down
// the list. A slot is published after its node is linked; Get falls back on
// the list for an entry newer than its snapshot, and for keys the index had
// no room for. Flat segments keep their binary search: an index there took
// most of the memory flattening saves.
//
// The writer keeps insert hints (skiplist.go): remembered positions of
// earlier inserts, one per key stream (a directory's entries, an inode's
// versions, a file's blocks: keys that share family and inode number) and a
// few recent ones (new inodes in allocation order). An insert that a hint
// brackets tightly at a low level walks down from there instead of from the
// head. The walk reads the list as it is, so a stale hint costs steps, never
// order; readers never see the hints.
package memtable
