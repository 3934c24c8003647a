package main

import (
	"errors"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/lsmfs/lsmfs/lsm"
	"github.com/syndtr/goleveldb/leveldb"
	"github.com/syndtr/goleveldb/leveldb/filter"
	"github.com/syndtr/goleveldb/leveldb/opt"
)

const (
	memtableSize = 64 << 20
	cacheSize    = 128 << 20
)

type lsmEngine struct {
	db *lsm.DB
	b  *lsm.Batch
}

func openLSM() opener {
	return opener{"lsm", func(dir string) (engine, error) {
		opts := &lsm.Options{UUID: [16]byte{1}, MemtableSize: memtableSize, CacheSize: cacheSize, BloomBitsPerKey: 10}
		if err := lsm.Format(dir, opts); err != nil {
			return nil, err
		}
		db, err := lsm.Open(dir, opts)
		if err != nil {
			return nil, err
		}
		return &lsmEngine{db: db, b: lsm.NewBatch()}, nil
	}}
}

func (e *lsmEngine) put(k, v []byte) error {
	e.b.Reset()
	e.b.Set(k, v)
	return e.db.Apply(e.b, false)
}

func (e *lsmEngine) get(k []byte) (bool, error) {
	_, err := e.db.Get(k)
	if errors.Is(err, lsm.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

func (e *lsmEngine) scan() (int, error) {
	it := e.db.NewIter(nil)
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	err := it.Error()
	it.Close()
	return n, err
}

func (e *lsmEngine) close() error { return e.db.Close() }

type pebbleEngine struct {
	db *pebble.DB
}

func openPebble() opener {
	return opener{"pebble", func(dir string) (engine, error) {
		cache := pebble.NewCache(cacheSize)
		defer cache.Unref()
		opts := &pebble.Options{Cache: cache, MemTableSize: memtableSize}
		// Set before EnsureDefaults, which registers the filter policies the
		// readers can use and copies L0's settings to the other levels.
		for i := range opts.Levels {
			opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		}
		opts.EnsureDefaults()
		db, err := pebble.Open(dir, opts)
		if err != nil {
			return nil, err
		}
		return &pebbleEngine{db: db}, nil
	}}
}

func (e *pebbleEngine) put(k, v []byte) error { return e.db.Set(k, v, pebble.NoSync) }

func (e *pebbleEngine) get(k []byte) (bool, error) {
	_, closer, err := e.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	closer.Close()
	return true, nil
}

func (e *pebbleEngine) scan() (int, error) {
	it, err := e.db.NewIter(nil)
	if err != nil {
		return 0, err
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	err = it.Error()
	it.Close()
	return n, err
}

func (e *pebbleEngine) close() error { return e.db.Close() }

type leveldbEngine struct {
	db *leveldb.DB
}

func openGoleveldb() opener {
	return opener{"goleveldb", func(dir string) (engine, error) {
		db, err := leveldb.OpenFile(dir, &opt.Options{
			WriteBuffer:        memtableSize,
			BlockCacheCapacity: cacheSize,
			Filter:             filter.NewBloomFilter(10),
		})
		if err != nil {
			return nil, err
		}
		return &leveldbEngine{db: db}, nil
	}}
}

func (e *leveldbEngine) put(k, v []byte) error { return e.db.Put(k, v, nil) }

func (e *leveldbEngine) get(k []byte) (bool, error) {
	_, err := e.db.Get(k, nil)
	if errors.Is(err, leveldb.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

func (e *leveldbEngine) scan() (int, error) {
	it := e.db.NewIterator(nil, nil)
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	it.Release()
	return n, it.Error()
}

func (e *leveldbEngine) close() error { return e.db.Close() }
