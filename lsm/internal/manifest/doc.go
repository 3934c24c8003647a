// Package manifest encodes the engine's version edits and the log files that
// hold them.
//
// A version is the set of tables in each level. The manifest is a log of
// VersionEdits (tables added and removed, counters advanced); replaying it
// from the first record rebuilds the current version. The engine starts a new
// manifest at every open and whenever the current one grows past its limit: it
// writes one edit that describes the whole version, syncs it, and points
// CURRENT at it (write CURRENT.tmp, sync, rename, sync the directory).
//
// Manifest file layout (part of the on-disk format; never change):
//
//	+----------------+---------+------------------------------------------+
//	| magic "LSMFSMF"| version |  record | record | ...                    |
//	|     (7 B)      |  (1 B)  |                                          |
//	+----------------+---------+------------------------------------------+
//	record: | length (4 B LE) | CRC32C of payload (4 B LE) |
//	        | CRC32C of the previous 8 bytes (4 B LE) | payload (edit)  |
//
// A record that is cut short, or whose payload fails its checksum at the very
// end of the file, or whose header fails its checksum with no whole record
// after it, or a tail of zeros, is a torn append (the edit was never
// acknowledged) and ends the log cleanly. A bad header or payload followed
// by a valid record is corruption. Since every manifest starts with a
// synced snapshot edit before CURRENT names it, a manifest with no complete
// edit is corrupt too (the engine checks that).
//
// Edit payload: a sequence of (uvarint tag, field) pairs; see edit.go.
//
// CURRENT holds "MANIFEST-<number> <crc32c of that name, 8 hex digits>\n".
package manifest
