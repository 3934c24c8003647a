package sstable

// OpenUnverified opens a table without verifying checksums, so that fuzz
// tests reach the decoders behind them.
func OpenUnverified(f ReadableFile, size int64, opts ReaderOptions) (*Reader, error) {
	return open(f, size, opts, false)
}
