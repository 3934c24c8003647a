// Package fs is lsmfs's filesystem: the FUSE operations, served through
// go-fuse's raw API (fuse.RawFileSystem), mapped onto the keys and values of
// one lsm engine.
//
// # Model
//
// Everything lives in the engine: inodes, directory entries, data blocks,
// xattrs, symlink targets and orphans, each a key family (keys.go holds the
// table and is the only place key bytes are built; values.go the value
// layouts). The FUSE node id is the inode number (root = 1) and the
// generation is constant, because inode numbers are never reused: a 64-bit
// counter hands them out and is persisted in reservations of 1024 ahead of
// use ("inode-next" in the superblock; after a crash numbering resumes above
// the last reservation).
//
// The raw API rather than go-fuse's fs package: the raw API is keyed by node
// id, which is exactly the inode key, so lsmfs needs no second in-memory
// tree of nodes, no lookup counting and no path bookkeeping; the kernel's
// dentry and inode caches are the only in-memory tree. Memory held per inode
// exists only while it has open handles (openInode: open count and write
// buffer).
//
// One FUSE operation is one atomic engine batch: create writes the entry,
// the new inode and the parent's size and times together; unlink deletes the
// entry and updates parent and child (or deletes the child with its blocks,
// xattrs and target) together; a write buffer flush writes the blocks and the
// inode's new size, times and stored-byte count together. A crash therefore
// never leaves half an operation. Two things are written in batches of their
// own: an inode number reservation (before the batch that first uses a number
// from it, which the journal's prefix property makes durable first) and, if
// the engine refuses a flush batch as too large, a flush split into several
// batches, each leaving the inode consistent.
//
// Data is stored in blocks of a size fixed at Format (superblock), keyed by
// (inode, block index); a block is stored as long as its written bytes, so a
// short last block and a small file are stored short, and holes (sparse files,
// truncation upward, punched ranges) store nothing and read as zeros. Each
// inode counts the bytes its blocks hold (st_blocks); with no block past the
// size, a count equal to the size means no holes, and a flush then knows the
// length of each block a write replaced whole without reading it. Writes go to a
// per-inode buffer shared by every handle of the inode (writebuf.go),
// flushed on flush, fsync, release, when it passes Options.WriteBufferSize,
// or before any operation that depends on the stored size or blocks.
// fsync and O_SYNC/O_DSYNC writes apply the flush batch with sync (or force
// the journal when nothing is buffered): durability on return.
//
// Unlinking the last name of an inode that is still open writes an orphan key
// in the same batch and keeps the inode; its last release deletes it, and New
// reclaims orphans a crash left behind. O_TMPFILE files are orphans from
// birth. Large files are deleted and truncated with one range deletion,
// small ones (up to 16 blocks) with point deletions, which cost readers less.
//
// Directories list by a prefix scan of their entries. A directory handle
// reads a snapshot, and a readdir cookie is an entry's position in it
// (readdir.go), so cookies never skip or repeat entries under concurrent
// changes and seekdir works; memory does not grow with directory size.
//
// Permissions are the kernel's (default_permissions, and POSIX ACLs through
// FUSE_POSIX_ACL): lsmfs checks none. It does apply the rules the kernel
// leaves to a filesystem: the caller's umask, sent apart from the mode
// (FUSE_DONT_MASK), unless the parent directory has a default ACL, which is
// inherited instead; the mode and the access ACL kept in step by setxattr
// and chmod (node_acl.go, acl.go); new inodes take the caller's uid and gid,
// or the parent's gid in a setgid directory (subdirectories inherit the
// bit); chown of a non-directory and an unprivileged write clear setuid (and
// setgid with group execute), and writes, truncation and chown remove file
// capabilities (security.capability). lsmfs asks for CAP_HANDLE_KILLPRIV_V2,
// so the kernel leaves all of this to it (WRITE_KILL_SUIDGID,
// FATTR_KILL_SUIDGID and OPEN_KILL_SUIDGID are honoured) and no longer asks
// for security.capability before every write(2); ctime changes with every change (and, as on ext4, with
// chown to the same owner), mtime and ctime with data, and a directory's
// mtime and ctime with its entries.
// Reads update access times as relatime (default), strictatime or noatime
// say, in memory first (atime.go).
//
// # Locks, mappings, ACLs
//
// lsmfs implements no GETLK/SETLK/SETLKW and does not ask for
// FUSE_POSIX_LOCKS or FUSE_FLOCK_LOCKS, so the kernel keeps flock(2), POSIX
// record and OFD locks itself, on its inode for the file. That is exact for
// a filesystem that only one kernel serves: every process using the mount
// sees every lock (tests/locks_test.go). Mappings go through the kernel's
// page cache (FOPEN_KEEP_CACHE): shared writable mappings are written back
// as WRITE requests, and the kernel writes dirty pages back or drops cached
// pages around truncation, fallocate and copy_file_range, so mappings and
// read/write agree (tests/mmap_test.go, tests/fsx_test.go). On kernels of
// FUSE protocol 7.45 (Linux 6.18) and later, a write-only handle, which
// nothing can read or map through, bypasses the page cache
// (FOPEN_DIRECT_IO): each write(2) arrives whole, without a copy into new
// cache pages, and the kernel writes back and drops other handles' cached
// pages of the range it covers, before and after the write
// (tests/coherence_test.go). On such a handle the kernel skips its
// remove-privileges SETATTR, so a write that clears setuid/setgid tells it
// to drop the inode's cached attributes (FUSE_NOTIFY_INVAL_INODE), as does a
// truncating open that clears them. POSIX ACLs are
// served when the kernel negotiates FUSE_POSIX_ACL (node_acl.go).
//
// # Concurrency
//
// Every FS method is safe for concurrent use. There is no global lock per
// operation: a sharded table of inode locks (locks.go) serializes
// read-modify-write of an inode record and its write buffer; an operation on
// several inodes locks them all before reading, in shard order, and
// re-validates the entry it looked up without locks. Renames across
// directories also take FS.renameMu (as the kernel's s_vfs_rename_mutex) so
// the loop check walks a still tree. Lookups, getattr of unopened inodes and
// readdir read the engine without locks. Lock order: dirHandle.mu, then
// FS.renameMu, then inode shards in ascending order, then leaf locks (open
// table, handle table, inode allocator).
//
// # Invariants (checked by Check)
//
//   - Every dentry names a live inode of the recorded type in a directory.
//   - nlink = number of dentries (directories: 2 + subdirectories); a
//     directory's size = its number of entries; an inode with nlink 0 has an
//     orphan key, and an orphan key names such an inode.
//   - Directories form a tree: one name each, parent pointers agreeing.
//   - No data block extends past its file's size or the block size, and an
//     inode's stored-byte count is the sum of its blocks' lengths.
//   - Every inode number is below the persisted "inode-next" bound.
//
// # Key layout (summary; keys.go has the table)
//
//	S name              superblock ("super", "inode-next")
//	I ino               inode attributes
//	D parent name       directory entry -> child ino, type
//	B ino index         data block
//	X ino name          xattr value
//	L ino               symlink target
//	O ino               orphan (unlinked while open)
//
// Integers are 8-byte big-endian, so one inode's blocks and xattrs and one
// directory's entries are contiguous and ordered.
package fs
