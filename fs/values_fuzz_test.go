package fs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Seeds for the fuzzers: valid encodings of each value. The committed corpus
// under testdata/fuzz holds them (and truncated and flipped variants);
// LSMFS_WRITE_FUZZ_SEEDS=1 go test -run TestWriteFuzzSeeds rewrites it.
func seedInodes() [][]byte {
	return [][]byte{
		encodeInode(&inode{Mode: syscall.S_IFDIR | 0o755, Nlink: 2, Parent: 1, Size: 3, Mtime: 1, Ctime: -5}),
		encodeInode(&inode{Mode: syscall.S_IFREG | 0o4644, Uid: 1000, Gid: 100, Nlink: 1, Size: 1 << 40, Stored: 12345, Nxattr: 2}),
		encodeInode(&inode{Mode: syscall.S_IFCHR | 0o600, Rdev: 0x0103, Nlink: 1}),
	}
}

func seedDentries() [][]byte {
	return [][]byte{
		encodeDentry(dentry{Ino: 1, Type: syscall.S_IFDIR >> 12}),
		encodeDentry(dentry{Ino: 1 << 60, Type: syscall.S_IFLNK >> 12}),
	}
}

func seedSuperblocks() [][]byte {
	return [][]byte{
		encodeSuperblock(&superblock{UUID: [16]byte{1, 2, 3}, BlockSize: 64 << 10, Created: 1700000000e9}),
		encodeInodeNext(1025),
	}
}

func seedKeys() [][]byte {
	return [][]byte{superKey("super"), inodeKey(1), dentryKey(1, "a"), blockKey(2, 3),
		xattrKey(4, "user.x"), symlinkKey(5), orphanKey(6), {}, {'Z'}}
}

func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("LSMFS_WRITE_FUZZ_SEEDS") != "1" {
		t.Skip("set LSMFS_WRITE_FUZZ_SEEDS=1 to rewrite testdata/fuzz")
	}
	for name, seeds := range map[string][][]byte{
		"FuzzInode": seedInodes(), "FuzzDentry": seedDentries(),
		"FuzzSuperblock": seedSuperblocks(), "FuzzKey": seedKeys(),
	} {
		dir := filepath.Join("testdata", "fuzz", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var all [][]byte
		for _, s := range seeds {
			all = append(all, s)
			if len(s) > 1 {
				all = append(all, s[:len(s)/2]) // truncated
				flipped := bytes.Clone(s)
				flipped[0] ^= 0x80 // bad version or family
				all = append(all, flipped)
			}
		}
		for i, s := range all {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed%02d", i)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func addSeeds(f *testing.F, seeds [][]byte) {
	for _, s := range seeds {
		f.Add(s)
	}
}

// wantCorrupt fails unless err is nil or a corruption error.
func wantCorrupt(t *testing.T, err error) {
	if err != nil && !errors.Is(err, ErrCorrupt) {
		t.Fatalf("error does not match ErrCorrupt: %v", err)
	}
}

func FuzzInode(f *testing.F) {
	addSeeds(f, seedInodes())
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := decodeInode(b)
		wantCorrupt(t, err)
		if err == nil && !bytes.Equal(encodeInode(&n), b) {
			t.Fatalf("round trip: %x -> %+v -> %x", b, n, encodeInode(&n))
		}
	})
}

func FuzzDentry(f *testing.F) {
	addSeeds(f, seedDentries())
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := decodeDentry(b)
		wantCorrupt(t, err)
		if err == nil && !bytes.Equal(encodeDentry(d), b) {
			t.Fatalf("round trip: %x -> %+v", b, d)
		}
	})
}

func FuzzSuperblock(f *testing.F) {
	addSeeds(f, seedSuperblocks())
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeSuperblock(b)
		wantCorrupt(t, err)
		if err == nil && !bytes.Equal(encodeSuperblock(&s), b) {
			t.Fatalf("round trip: %x -> %+v", b, s)
		}
		bound, err := decodeInodeNext(b)
		wantCorrupt(t, err)
		if err == nil && !bytes.Equal(encodeInodeNext(bound), b) {
			t.Fatalf("inode-next round trip: %x -> %d", b, bound)
		}
	})
}

func FuzzKey(f *testing.F) {
	addSeeds(f, seedKeys())
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := DecodeKey(b)
		wantCorrupt(t, err)
		if err == nil && k.String() == "" {
			t.Fatal("empty String")
		}
	})
}
