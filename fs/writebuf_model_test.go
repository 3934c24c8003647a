package fs_test

import (
	"bytes"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/fs"
)

// TestWriteBufferModel: a wider random model than
// TestRandomWritesAgainstModel: zero range, fallocate, O_TRUNC, two handles,
// copy_file_range, getattr size after every step.
func TestWriteBufferModel(t *testing.T) {
	for _, age := range []time.Duration{-1, 50 * time.Microsecond, time.Millisecond} {
		for round := 0; round < 10; round++ {
			seed := testSeed(t) + uint64(round)
			rng := rand.New(rand.NewPCG(seed, 0))
			e := newFileEnv(t, fs.Options{WriteBufferSize: 16 << 10, FlushAge: age})
			ino, fh := e.mustCreate(1, "f")
			fh2 := e.mustOpen(ino, syscall.O_RDWR)
			var model []byte
			grow := func(n int) {
				if n > len(model) {
					model = append(model, make([]byte, n-len(model))...)
				}
			}
			var log []string
			for i := 0; i < 300; i++ {
				h := fh
				if rng.IntN(2) == 0 {
					h = fh2
				}
				op := rng.IntN(14)
				switch {
				case op < 5:
					off := rng.IntN(12 * bs)
					data := pattern(1+rng.IntN(2*bs), byte(i))
					e.mustWrite(ino, h, uint64(off), data)
					grow(off + len(data))
					copy(model[off:], data)
					log = append(log, "write")
				case op < 6:
					size := rng.IntN(12 * bs)
					wantErr(t, "truncate", e.truncate(ino, uint64(size)), 0)
					if size < len(model) {
						model = model[:size]
					} else {
						grow(size)
					}
					log = append(log, "trunc")
				case op < 7:
					off, n := rng.IntN(12*bs), 1+rng.IntN(3*bs)
					wantErr(t, "punch", e.fallocate(ino, h, uint64(off), uint64(n), 3), 0)
					if off < len(model) {
						clear(model[off:min(off+n, len(model))])
					}
					log = append(log, "punch")
				case op < 8:
					off, n := rng.IntN(12*bs), 1+rng.IntN(3*bs)
					mode := uint32(0x10)
					keep := rng.IntN(2) == 0
					if keep {
						mode |= 1
					}
					wantErr(t, "zero", e.fallocate(ino, h, uint64(off), uint64(n), mode), 0)
					if off < len(model) {
						clear(model[off:min(off+n, len(model))])
					}
					if !keep {
						grow(off + n)
					}
					log = append(log, "zero")
				case op < 9:
					off, n := rng.IntN(12*bs), 1+rng.IntN(3*bs)
					wantErr(t, "fallocate", e.fallocate(ino, h, uint64(off), uint64(n), 0), 0)
					grow(off + n)
					log = append(log, "falloc")
				case op < 10:
					e.flush(ino, h)
					log = append(log, "flush")
				case op < 11:
					// O_TRUNC through a third handle.
					if rng.IntN(4) == 0 {
						f3 := e.mustOpen(ino, syscall.O_RDWR|syscall.O_TRUNC)
						e.release(ino, f3)
						model = model[:0]
						log = append(log, "otrunc")
					}
				case op < 12:
					off := rng.IntN(len(model) + 1)
					n := min(rng.IntN(3*bs), len(model)-off) // the kernel clips to the source size
					dst := 13*bs + rng.IntN(3*bs)
					in := fuse.CopyFileRangeIn{InHeader: e.hdr(ino), FhIn: h, OffIn: uint64(off), NodeIdOut: ino, FhOut: fh, OffOut: uint64(dst), Len: uint64(n)}
					if off+n > dst {
						continue
					}
					got, st := e.raw.CopyFileRange(nil, &in)
					if st != fuse.OK {
						t.Fatalf("cfr %v", st)
					}
					src := append([]byte(nil), model[off:min(off+n, len(model))]...)
					if int(got) != len(src) {
						t.Fatalf("seed %d step %d cfr %d want %d (off %d n %d dst %d size %d); ops %v", seed, i, got, len(src), off, n, dst, len(model), log[max(0, len(log)-8):])
					}
					if len(src) > 0 {
						grow(dst + len(src))
						copy(model[dst:], src)
					}
					log = append(log, "cfr")
				default:
					off := rng.IntN(len(model) + 1)
					n := rng.IntN(3 * bs)
					got := e.mustRead(ino, h, uint64(off), n)
					want := model[off:min(off+n, len(model))]
					if !bytes.Equal(got, want) {
						t.Fatalf("seed %d step %d: read %d@%d mismatch; ops %v", seed, i, n, off, log[max(0, len(log)-8):])
					}
					log = append(log, "read")
				}
				if a := e.attr(ino); a.Size != uint64(len(model)) {
					t.Fatalf("seed %d step %d: size %d want %d; ops %v", seed, i, a.Size, len(model), log[max(0, len(log)-8):])
				}
			}
			if got := e.mustRead(ino, fh, 0, len(model)+10); !bytes.Equal(got, model) {
				t.Fatalf("seed %d: final read mismatch", seed)
			}
			e.release(ino, fh)
			e.release(ino, fh2)
			e.check()
			e.close()
		}
	}
}

// TestWriteBufferConcurrentOneFile: writers, truncaters, punchers,
// fsyncs, reads and reopen/release on one file, with the background
// flusher, then Check.
func TestWriteBufferConcurrentOneFile(t *testing.T) {
	for round := 0; round < 6; round++ {
		seed := testSeed(t) + uint64(round)
		e := newFileEnv(t, fs.Options{WriteBufferSize: 16 << 10, FlushAge: 100 * time.Microsecond})
		ino, fh0 := e.mustCreate(1, "f")
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(seed, uint64(w)))
				hd := func() fuse.InHeader { return fuse.InHeader{NodeId: ino} }
				var oin fuse.OpenIn
				oin.InHeader, oin.Flags = hd(), syscall.O_RDWR
				var oout fuse.OpenOut
				if st := e.raw.Open(nil, &oin, &oout); st != fuse.OK {
					t.Errorf("open %v", st)
					return
				}
				fh := oout.Fh
				for i := 0; i < 300; i++ {
					switch rng.IntN(9) {
					case 0, 1, 2:
						off := rng.IntN(10 * bs)
						in := fuse.WriteIn{InHeader: hd(), Fh: fh, Offset: uint64(off)}
						if _, st := e.raw.Write(nil, &in, bytes.Repeat([]byte{byte(w + 1)}, 1+rng.IntN(2*bs))); st != fuse.OK {
							t.Errorf("write %v", st)
						}
					case 3:
						in := fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{InHeader: hd(), Valid: fuse.FATTR_SIZE, Size: uint64(rng.IntN(10 * bs))}}
						if st := e.raw.SetAttr(nil, &in, &fuse.AttrOut{}); st != fuse.OK {
							t.Errorf("truncate %v", st)
						}
					case 4:
						in := fuse.FallocateIn{InHeader: hd(), Fh: fh, Offset: uint64(rng.IntN(10 * bs)), Length: uint64(1 + rng.IntN(3*bs)), Mode: uint32([]int{3, 0x10, 0x11, 0}[rng.IntN(4)])}
						if st := e.raw.Fallocate(nil, &in); st != fuse.OK {
							t.Errorf("fallocate %v", st)
						}
					case 5:
						in := fuse.FsyncIn{InHeader: hd(), Fh: fh}
						if st := e.raw.Fsync(nil, &in); st != fuse.OK {
							t.Errorf("fsync %v", st)
						}
					case 6:
						in := fuse.ReadIn{InHeader: hd(), Fh: fh, Offset: uint64(rng.IntN(10 * bs)), Size: 3 * bs}
						buf := make([]byte, 3*bs)
						res, st := e.raw.Read(nil, &in, buf)
						if st != fuse.OK {
							t.Errorf("read %v", st)
							continue
						}
						b, _ := res.Bytes(buf)
						for _, c := range b {
							if c > 4 {
								t.Errorf("read byte %d never written", c)
								break
							}
						}
					case 7:
						e.raw.Flush(nil, &fuse.FlushIn{InHeader: hd(), Fh: fh})
						e.raw.Release(nil, &fuse.ReleaseIn{InHeader: hd(), Fh: fh})
						if st := e.raw.Open(nil, &oin, &oout); st != fuse.OK {
							t.Errorf("open %v", st)
							return
						}
						fh = oout.Fh
					default:
						in := fuse.GetAttrIn{InHeader: hd()}
						e.raw.GetAttr(nil, &in, &fuse.AttrOut{})
						time.Sleep(50 * time.Microsecond)
					}
				}
				e.raw.Flush(nil, &fuse.FlushIn{InHeader: hd(), Fh: fh})
				e.raw.Release(nil, &fuse.ReleaseIn{InHeader: hd(), Fh: fh})
			}(w)
		}
		wg.Wait()
		// The size the last handle sees must be the stored size, and the
		// data must read back within it.
		a := e.attr(ino)
		got := e.mustRead(ino, fh0, 0, int(a.Size)+bs)
		if len(got) != int(a.Size) {
			t.Fatalf("seed %d: read %d bytes, size %d", seed, len(got), a.Size)
		}
		e.release(ino, fh0)
		e.check()
		e.close()
	}
}
