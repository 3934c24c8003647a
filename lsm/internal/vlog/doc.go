// Package vlog is the engine's value log: large values (file data blocks)
// live in append-only segment files beside the tables, and the tree holds a
// small pointer to each. Compactions then move pointers, not data, so a
// byte of file data is written about once (WiscKey, Badger).
//
// Segment file layout (part of the on-disk format; never change):
//
//	+-------------------+---------+------------------------+---------------
//	| magic "LSMFSVL"   | version | segment number (8B LE) | record ...
//	|       (7 B)       |  (1 B)  |                        |
//	+-------------------+---------+------------------------+---------------
//	record:
//	| header CRC32C (4B) | value CRC32C (4B) | key len uvarint |
//	| value len uvarint  | key               | value           |
//
// The header CRC covers the value CRC, both lengths and the key, so a scan
// (the cleaner's) can walk records and learn which key each belongs to; the
// value CRC is also stored in the pointer, so a read checks the value alone.
//
// Pointer (the inline value of a KindValuePointer entry):
//
//	| version (1B) | segment uvarint | value offset uvarint | value len uvarint | value CRC32C (4B LE) |
//
// Reads: Read takes one value, through the block cache. ReadRun takes the
// values of records that follow each other in a segment (a file's blocks as
// they were written) with one read of at most MaxRun bytes (a 1 MiB FUSE
// READ and its records' headers), checks each value's CRC, and bypasses the
// cache (iterator scans use it). A run of DropRunMin bytes or more is a
// stream whose reader caches it: one the page cache does not already hold is
// read around it (O_DIRECT, widened to aligned blocks, where the file is a
// vfs.DirectReader), and one read through it is dropped from it after. Runs
// read around the cache one after the other are a stream, and the Reader
// reads its next runs ahead in the background (readahead.go); values read
// ahead are checked against their pointers' CRCs like any others.
//
// Writes: Append buffers a record's header and key, and a value of more than
// 512 bytes by reference (the caller keeps it unchanged until Flush or
// Discard returns); Flush writes the buffer and the values with one
// vectored write (pwritev), so file data is copied once, by the kernel,
// on its way into the segment.
//
// Concurrency: a Writer has one user at a time (the engine's commit path);
// reads (Read, ReadRun) and scans use ReadAt and run concurrently with it.
package vlog
