package sstable

import (
	"fmt"
	"time"
)

// Defaults of WriterOptions.
const (
	// DefaultBlockSize is the default target size of a data block.
	// BenchmarkSeekGE on 1M entries (17-byte keys, 100-byte values, LZ4),
	// CPU time per random seek on a shared 2-core machine:
	//
	//	block   uncached  cached  index    table
	//	 4 KiB    3.2 µs  2.5 µs  562 KiB  68.7 MiB
	//	 8 KiB    4.4 µs  2.3 µs  287 KiB  67.6 MiB
	//	16 KiB    7.6 µs  2.5 µs  148 KiB  66.7 MiB
	//
	// Uncached seeks grow with the block (read, checksum, decompress and
	// check it all); cached ones do not; the index (kept in memory per open
	// table) halves with each doubling. 8 KiB is the balance.
	DefaultBlockSize = 8 << 10
	// DefaultRestartInterval is the default number of keys between restart
	// points.
	DefaultRestartInterval = 16
	// DefaultBloomBitsPerKey gives a false-positive rate of about 1%.
	DefaultBloomBitsPerKey = 10
)

// WriterOptions configure a Writer. The zero value, after EnsureDefaults,
// writes LZ4-compressed 8 KiB blocks and no bloom filter; use
// DefaultWriterOptions for the engine's defaults.
type WriterOptions struct {
	// BlockSize is the target decoded size of a data block; a block is cut
	// before an entry that would take it past this size. Default 8 KiB.
	BlockSize int
	// RestartInterval is the number of keys between restart points in a
	// block. Default 16.
	RestartInterval int
	// BloomBitsPerKey sizes the table's bloom filter; 0 writes no filter.
	// 10 (DefaultBloomBitsPerKey) gives about 1% false positives.
	BloomBitsPerKey int
	// DisableCompression stores every block uncompressed. By default a
	// block is LZ4-compressed when that saves at least 1/8 of it.
	DisableCompression bool
	// Clock gives the creation time recorded in the properties. Default
	// time.Now.
	Clock func() time.Time
}

// DefaultWriterOptions returns the engine's defaults: 8 KiB blocks, restart
// every 16 keys, 10 bloom bits per key, LZ4.
func DefaultWriterOptions() WriterOptions {
	return WriterOptions{
		BlockSize:       DefaultBlockSize,
		RestartInterval: DefaultRestartInterval,
		BloomBitsPerKey: DefaultBloomBitsPerKey,
	}
}

// EnsureDefaults fills zero fields with their defaults (BloomBitsPerKey
// stays 0: no filter).
func (o *WriterOptions) EnsureDefaults() {
	if o.BlockSize == 0 {
		o.BlockSize = DefaultBlockSize
	}
	if o.RestartInterval == 0 {
		o.RestartInterval = DefaultRestartInterval
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
}

// Validate reports options out of range.
func (o WriterOptions) Validate() error {
	switch {
	case o.BlockSize < 1 || o.BlockSize > maxBlockLen/2:
		return fmt.Errorf("%w: BlockSize %d not in [1, %d]", ErrBadOptions, o.BlockSize, maxBlockLen/2)
	case o.RestartInterval < 1 || o.RestartInterval > maxRestartInterval:
		return fmt.Errorf("%w: RestartInterval %d not in [1, %d]", ErrBadOptions, o.RestartInterval, maxRestartInterval)
	case o.BloomBitsPerKey < 0 || o.BloomBitsPerKey > 64:
		return fmt.Errorf("%w: BloomBitsPerKey %d not in [0, 64]", ErrBadOptions, o.BloomBitsPerKey)
	}
	return nil
}

func (o WriterOptions) String() string {
	comp := "lz4"
	if o.DisableCompression {
		comp = "none"
	}
	return fmt.Sprintf("block-size=%d restart-interval=%d bloom-bits-per-key=%d compression=%s",
		o.BlockSize, o.RestartInterval, o.BloomBitsPerKey, comp)
}
