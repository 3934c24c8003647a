// Package vfs is the I/O seam of the engine: every file the engine (and, through
// structural typing, the journal) touches is reached through the small FS and File
// interfaces defined here.
//
// Two implementations ship with the package:
//
//   - Default, the operating system (os.File, fsync, fdatasync, flock). Its
//     files also offer optional interfaces the engine checks for: vectored
//     writes (VectorWriterAt), writeback and page-cache hints (WriteBacker,
//     CacheDropper) and, for files opened for reading, reads around the
//     page cache (DirectReader: a second descriptor with O_DIRECT, opened
//     at the first such read and closed with the file).
//   - MemFS, an in-memory filesystem with strict durability: file contents become
//     durable only at File.Sync, and directory entries (create, rename, remove) only
//     at FS.SyncDir of their directory. CrashClone returns the state a machine would
//     find after power loss at that instant, which is what crash tests reopen.
//
// and two layers for tests:
//
//   - RecordingFS, a MemFS that logs the changes not yet durable; a Window
//     captured at any instant (also from a hook inside any call) gives every
//     crash state: each prefix of the pending changes, torn writes, and
//     reorderings (record.go).
//   - ErrorFS, which wraps any FS and fails the calls an Injector picks: EIO,
//     ENOSPC and short writes, on the i-th call (OnIndex), at random
//     (Randomly), or from a seeded schedule (Seeded) (errorfs.go).
//
// Invariants:
//   - Paths are slash-separated and cleaned; MemFS keeps a real tree, so a rename
//     of a directory moves its contents.
//   - File is safe for concurrent ReadAt; Write, WriteAt, Truncate and Sync need
//     external ordering (the engine has one writer per file).
//   - A File implements ReadAt, WriteAt, Sync and Close, so it satisfies
//     journal.Device without either package importing the other.
package vfs
