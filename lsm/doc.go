// Package lsm is lsmfs's storage engine: a general ordered key-value store
// built as a log-structured merge tree. It knows nothing about files; package
// fs owns the key encoding.
//
// # Model
//
// A DB maps byte-string keys to byte-string values. Writes are grouped in a
// Batch (Set, Delete, DeleteRange) and applied atomically by Apply; with
// sync=true, Apply returns only after the batch is durable. Reads (Get,
// NewIter) see every applied batch; a Snapshot pins a consistent view.
//
// Write path: batch -> journal (group commit, package journal) -> mutable
// memtable. Full memtables become immutable and are flushed to level-0
// SSTables; background compactions merge tables down the levels. The
// manifest (a log of version edits, switched atomically through CURRENT)
// records which tables form the current version.
//
// Sequence numbers: each batch entry gets one; an entry is visible to a
// reader whose snapshot sequence number is >= it. A range tombstone with
// sequence number s deletes versions with sequence numbers < s in its range.
//
// # Concurrency
//
// Every DB method is safe for concurrent use. Writers are serialized for
// sequence assignment and memtable insertion (commit mutex) but share journal
// forces (group commit). Readers take no locks beyond a brief read-state
// reference. Iterators and Snapshots are not safe for concurrent use by
// themselves, but any number may exist. Close waits for the reads in
// progress (a Get, an iterator's move or value read) before it closes the
// tables, value log and cache they read; reads after it, and every move of
// an iterator left open, fail with ErrClosed.
//
// # Failures
//
// A failed write or force makes the engine fail-stop: writes return
// ErrFailed until it is reopened, reads go on. Running out of space is not
// fatal: writes that only add data return ErrNoSpace, deletions are still
// applied, and writes succeed again once space is freed (space.go).
//
// # Invariants
//
//   - Journal order equals sequence order; a crash keeps a prefix of batches.
//   - A table is deleted only when no version references it.
//   - In levels >= 1, tables are disjoint and sorted; every version of a user
//     key in a level lives in one table. Newer levels hold newer versions.
//   - With a value log, tables hold values of ValueThreshold bytes or more
//     only from flushes of less than Options.FlushMoveMin of them: a flush
//     moves the values synchronous batches kept inline (one force per
//     commit) to segments of its own, synced and sealed before the manifest
//     edit that names its tables (the seals are recorded in it or an
//     earlier one; valueSeparator).
package lsm
