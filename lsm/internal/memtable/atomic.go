package memtable

import "sync/atomic"

func loadU32(p *uint32) uint32     { return atomic.LoadUint32(p) }
func storeU32(p *uint32, v uint32) { atomic.StoreUint32(p, v) }
