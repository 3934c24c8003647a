package base

// InternalIterator iterates over internal keys in CompareInternal order.
// Positioning methods return whether the iterator is on an entry; when they
// return false, Error tells exhaustion from failure. Key and Value are valid
// until the next positioning call. Implementations are not safe for
// concurrent use.
type InternalIterator interface {
	// SeekGE moves to the first entry whose user key is >= key.
	SeekGE(key []byte) bool
	// SeekLT moves to the last entry whose user key is < key.
	SeekLT(key []byte) bool
	First() bool
	Last() bool
	Next() bool
	Prev() bool
	Key() InternalKey
	Value() []byte
	Error() error
	Close() error
}

// RangeTombstone deletes every key k with Start <= k < End and a sequence
// number below Seq.
type RangeTombstone struct {
	Start, End []byte
	Seq        SeqNum
}

// Covers reports whether the tombstone deletes a version of key with sequence
// number seq.
func (t RangeTombstone) Covers(key []byte, seq SeqNum) bool {
	return seq < t.Seq && string(t.Start) <= string(key) && string(key) < string(t.End)
}
