// Package journal is the write-ahead journal of lsmfs: a ring of
// checksummed, optionally LZ4-compressed frames on a block device or a file,
// filled by a group committer.
//
// # Model
//
// Writers call Enqueue (or Append) with records; each record gets a log
// sequence number (lsn), consecutive and in call order, starting at 1 on a
// freshly formatted journal and continuing across reopen. Records accumulate
// in one pending frame. A single committer goroutine takes the pending frame
// when a writer asked for durability (sync=true, Sync, Close), when it
// reached Options.MaxFrameBytes, or when Options.CommitInterval elapsed since
// its first record; writes it with one WriteAt; forces it with one
// Device.Sync; and only then acks every waiter of the frame. While it writes,
// new records gather in the next pending frame: concurrent committers share
// one write and one force (group commit). The records of one Enqueue call
// always land in one frame, so after a crash a batch is replayed whole or not
// at all.
//
// Invariants of the committer: frames are written in sequence order; a frame
// is written only after the previous one was forced, so at most one
// unforced frame exists and a crash can tear only the last frame of the log;
// an ack follows the force of its frame; after a failed write or force no
// further frame is written and the error is sticky (fail-stop).
//
// Engine contract: Checkpoint(lsn) after a memtable flush made records
// <= lsn redundant frees their ring space. When the ring lacks space for the
// pending frame, Enqueue waits for a Checkpoint (backpressure); records are
// never overwritten while live. OnPressure asks the engine to checkpoint
// when more than half of the ring is live. Because Enqueue may block for
// space, whatever leads the engine to Checkpoint (a memtable flush) must not
// need the lock the engine holds around Enqueue. Open never formats; Format
// is the mkfs step. Open, then Replay, then Enqueue: Replay delivers every
// durable record above the checkpoint, in order.
//
// # Knobs
//
//	CommitInterval      5s     longest delay of a sync=false record (ext4's commit=)
//	MaxFrameBytes       1 MiB  payload at which a frame is committed without a sync request
//	DisableCompression  false  LZ4 is used when it makes the payload smaller
//
// Records of one Enqueue call must fit in a frame of at most a quarter of the
// ring (ErrRecordTooLarge).
//
// # Concurrency
//
// Every method of Journal is safe for concurrent use. Enqueue may be called
// under the engine's commit mutex (it only blocks for ring space or a full
// frame) and Commit.Wait outside it. Checkpoint may run while writers (and
// the committer) wait for space: it waits at most for the frame write in
// progress, never for space or for queued frames. Replay holds the checkpoint
// lock: its callback must not call Checkpoint or Close. OnPressure runs on a
// goroutine of its own, never under a journal lock.
//
// Lock order: Journal.ckptMu (Checkpoint, Replay, Close), then Journal.ioMu
// (one device writer at a time: a frame write+force or a superblock
// write+force), then Journal.mu (group-commit state, held briefly, never
// across I/O).
//
// # Durability
//
// All durability comes from Device.Sync: fdatasync(2) on files and block
// devices (the block device target opens O_DIRECT but not O_DSYNC: one flush
// per frame either way, and the superblock write is ordered by its own
// force). The engine's vfs.File satisfies Device; vfs.MemFS keeps only synced
// bytes at CrashClone, which is what the journal's own crash tests rely on.
// A record acked by Append(sync=true), Commit.Wait or Sync survives a crash.
// A record enqueued with sync=false is forced within CommitInterval; if the
// machine crashes before, it is lost (like ext4 without fsync). Commit.Wait
// on such a record forces nothing: it waits for that commit.
//
// # On-disk layout
//
// All integers are little-endian; all checksums CRC32C (Castagnoli).
//
//	device:
//	+----------------+----------------+--------------------------------------------+
//	| superblock 0   | superblock 1   | ring: frames, each BlockSize-aligned       |
//	| 4 KiB          | 4 KiB          | [ringStart, ringStart+ringSize)            |
//	+----------------+----------------+--------------------------------------------+
//	0                4096             8192 = ringStart
//
//	superblock copy (rest of the 4 KiB block is zero):
//	 0  magic "LSMFSJNL"     8  version u8 (1)      9  copy index u8
//	10  flags u8 (bit 0: clean)  11  reserved u8   12  block size u32 (4096)
//	16  uuid [16]           32  nonce u64 (random per Format)
//	40  generation u64      48  ring start u64      56  ring size u64
//	64  checkpoint lsn u64  72  checkpoint off u64  80  checkpoint seq u64
//	88  crc32c of [0,88) u32
//
//	frame (header, payload, zero padding to a multiple of 4096):
//	 0  magic "LJFR"         4  version u8 (1)      5  flags u8 (bit 0: LZ4)
//	 6  reserved u16         8  seq u64            16  first lsn u64
//	24  record count u32    28  raw length u32     32  stored length u32
//	36  crc32c u32, seeded with crc32c(uuid || nonce), over the header
//	    (this field zero) and the stored payload
//	40  payload: stored length bytes; raw form (LZ4 block when flag set):
//	    count records, each a uvarint length followed by its bytes
//
// The two superblock copies are written alternately (copy = generation mod
// 2) and the valid copy with the highest generation wins, so a torn
// superblock write loses at most the newest checkpoint, whose frames have
// not been reused yet: Checkpoint frees ring space only after the new copy
// is forced. The checkpoint names the lsn below which records are not
// needed, and the offset and seq of the frame holding lsn+1 (or of the next
// frame to be written). Each record keeps its length prefix next to it:
// on engine-like metadata records (BenchmarkCompression) this layout
// compressed better (3.6x per 1 MiB frame) than all lengths first (3.3x),
// whose run of varying length bytes LZ4 cannot match.
//
// A frame never straddles the ring end: when it does not fit before the end
// it goes to the ring start, and the skipped bytes stay live until the
// checkpoint passes them. A frame is at most a quarter of the ring. Mixing
// the uuid and the per-Format nonce into the checksum seed means frames of an
// earlier format of the same device never validate.
//
// # Recovery
//
// Open reads the superblock and follows frames from the checkpoint with
// consecutive seqs (trying the ring start when the expected frame is not at
// the current position) and consecutive lsns, decoding every payload (a
// checksummed frame whose records do not decode is corruption). The first position where no
// valid frame follows ends the log. Open then reads the rest of the ring
// (the free part, up to the checkpoint position) block by block: if any
// valid frame with a higher seq exists, the frame that stopped the scan was
// in the middle of the log and Open fails with ErrCorrupt naming its offset
// and seq. Otherwise a frame that named the expected seq but failed
// validation is a torn tail (Recovery().TailErr wraps ErrTornFrame) and the
// log ends cleanly before it. This costs one read of the free ring per Open,
// except after a clean close: Close marks the superblock clean (flag bit 0)
// when every record is checkpointed, which promises that no frame follows
// the checkpoint, and Open then skips the scan; a writable Open clears the
// mark (one forced superblock write) before any frame can be written, so a
// crash after it scans again. Options.ReadOnly opens for Replay only and
// never writes. A
// record whose bytes happen to be a valid frame of this very journal, stored
// at a block boundary of a torn frame, could be mistaken for a later frame;
// that needs a copy of the journal's own frames and is not defended against.
package journal
