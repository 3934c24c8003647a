// Package base holds what every part of the engine agrees on: internal keys
// (user key + sequence number + kind), the ordering of internal keys, the
// internal iterator interface that memtables, sstables and merging iterators
// implement, range tombstones, and the corruption error.
//
// Internal key encoding (part of the on-disk format; never change):
//
//	+-----------------+---------------------------------+
//	| user key (n B)  | trailer: seq<<8 | kind (8 B, LE)|
//	+-----------------+---------------------------------+
//
// Ordering: user keys ascending (bytes.Compare), then trailer descending, so
// the newest version of a key comes first.
package base
