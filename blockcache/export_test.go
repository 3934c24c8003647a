package blockcache

// KeyHash exposes the Ristretto key of (file, off).
var KeyHash = keyHash

// SetUnderHash stores b for (file, off) under an arbitrary Ristretto key, to
// simulate a hash collision.
func (c *Cache) SetUnderHash(hash, file, off uint64, b []byte) {
	c.rc.Set(hash, &entry{file: file, off: off, b: b}, int64(len(b)))
}
