// Package sstable writes and reads the engine's immutable sorted tables.
//
// A table holds point entries (SET, DEL, VPTR internal keys with values, in
// base.CompareInternal order) and range tombstones (already fragmented
// spans). A Writer builds one table in a single pass and returns its Meta; a
// Reader opens it, keeps the index, filter, range tombstones and properties
// in memory, and reads data blocks on demand through the shared block cache.
//
// # File layout
//
//	+----------------------------+  offset 0
//	| data block 0     | trailer |  entries of point keys, prefix-compressed
//	| data block 1     | trailer |
//	| ...                        |
//	| data block n-1   | trailer |  <- Properties.DataSize
//	| filter block     | trailer |  bloom over user keys     (optional)
//	| range-del block  | trailer |  fragmented tombstones    (optional)
//	| index block      | trailer |  one entry per data block
//	| properties block | trailer |
//	| metaindex block  | trailer |  names -> filter / range-del / properties
//	| footer (45 bytes)          |
//	+----------------------------+  file size
//
// Data blocks are contiguous from offset 0 in index order; the reader checks
// that. Every byte of the file is covered by a checksum: blocks by their
// trailer, the footer by its own CRC.
//
// # Block trailer (5 bytes)
//
//	+------------------+------------------------------------------+
//	| compression (1)  | CRC32C (Castagnoli), little-endian (4)   |
//	+------------------+------------------------------------------+
//
// The CRC covers the stored contents followed by the compression byte.
// Compression 0 is none; 1 is LZ4, where the stored contents are
// uvarint(decoded length) followed by one LZ4 block. The writer compresses a
// block only when that saves at least 1/8 of it (and never the filter or the
// metaindex). Checksums are verified on every read from the file; blocks in
// the cache are already verified, decompressed and checked.
//
// # Block (decoded)
//
//	+---------+---------+-----+-----------+-----------+-----+----------------+
//	| entry 0 | entry 1 | ... | restart 0 | restart 1 | ... | num restarts   |
//	|         |         |     | (uint32 LE offsets of entries)| (uint32 LE)    |
//	+---------+---------+-----+-----------+-----------+-----+----------------+
//
//	entry: shared (uvarint) | unshared (uvarint) | value length (uvarint) |
//	       key[shared:] (unshared bytes) | value
//
// A key is rebuilt from the first "shared" bytes of the previous entry's key
// plus its own bytes. A restart point is an entry that shares nothing; data
// blocks have one every RestartInterval (default 16, at most 128) entries,
// and lookups binary-search them. Index, range-del, properties and metaindex
// blocks have a restart point at every entry (no prefix compression, so
// decoding them allocates no more than their length). An empty block is
// just a zero count.
//
// # Data blocks
//
// Keys are encoded internal keys (base.InternalKey.Append: user key, then
// the 8-byte little-endian trailer seq<<8|kind), strictly increasing in
// CompareInternal order; values are the entry's value (for VPTR, the value
// pointer). A block is cut before an entry that would take it past
// WriterOptions.BlockSize (default 8 KiB), so a block holds at least one
// entry; versions of one user key may span blocks.
//
// # Index block
//
// One entry per data block: key = a separator S, value = block handle
// (offset, stored length; two uvarints, the trailer not included), with
//
//	last key of block i  <=  S_i  <  first key of block i+1
//
// S_i is shortened with base.Separator (base.Successor for the last block)
// on user keys: when that yields a user key u strictly between the blocks',
// S_i = (u, MaxSeqNum, KindMax), the smallest internal key of u; otherwise S_i
// is the block's last key. SeekGE(k) thus goes to the first block whose
// separator's user key is >= k.
//
// # Filter block
//
// One bloom filter per table over the distinct user keys (see bloom.go for
// the hash and probe sequence): the bit array, then one byte with the probe
// count k. Default 10 bits per key and k = 7; measured false-positive rate
// about 0.8% (TestBloomFalsePositiveRate).
//
// # Range-del block
//
// key = internal key (start, seq, RANGEDEL), value = exclusive end; sorted by
// start ascending then seq descending. The reader loads them all at Open.
//
// # Properties and metaindex blocks
//
// Properties: name -> value, names sorted (see properties.go). Metaindex:
// "lsmfs.filter.bloom", "lsmfs.properties", "lsmfs.rangedel" -> block
// handle; only the properties entry is mandatory.
//
// # Footer (45 bytes, at the end of the file)
//
//	+-------------------------------+  size-45
//	| metaindex offset (uint64 LE)  |
//	| metaindex length (uint64 LE)  |
//	| index offset     (uint64 LE)  |
//	| index length     (uint64 LE)  |
//	| format version (1 byte) = 1   |
//	| magic "\x89LSMsst\n" (8)      |
//	| CRC32C of the above (4, LE)   |
//	+-------------------------------+  size
//
// # Corruption
//
// A table that fails a checksum, does not decode, or contradicts itself
// (keys out of order or outside their index separators, handles out of
// place, counts disagreeing with the properties) yields a
// *base.CorruptionError naming the file and byte offset, matched by
// errors.Is(err, base.ErrCorrupt). Every length read from the file is
// bounded by the file's size (or, for LZ4, by 256 times the stored size)
// before anything is allocated, and rebuilding keys costs at most
// 128 times a block's length; the reader never panics on bad bytes.
//
// # Concurrency
//
// A Writer is used by one goroutine. A Reader is safe for concurrent use:
// it is immutable after Open and its counters are atomic. An Iterator is used
// by one goroutine; any number may run on one Reader. Blocks shared through
// the cache are never modified.
package sstable
