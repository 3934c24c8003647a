// Package rangedel fragments range tombstones and answers "which tombstone
// covers this key" for the engine's readers, flushes and compactions.
//
// A fragmented set is a list of tombstones, sorted by (Start asc, Seq desc),
// in which any two spans are either identical or disjoint. Fragmenting is what
// lets each table store its tombstones as a sorted, binary-searchable list, and
// what lets a compaction split a tombstone at an output file boundary.
package rangedel
