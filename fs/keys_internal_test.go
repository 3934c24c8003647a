package fs

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestKeys encodes keys of every family and prints their bytes and their
// decoding ("encode"), and decodes raw hex ("decode"), including bad keys.
func TestKeys(t *testing.T) {
	datadriven.RunTest(t, "testdata/keys", func(t *testing.T, d *datadriven.TestData) string {
		var b strings.Builder
		switch d.Cmd {
		case "encode":
			for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
				f := strings.Fields(line)
				num := func(i int) uint64 {
					n, err := strconv.ParseUint(f[i], 10, 64)
					if err != nil {
						t.Fatalf("%s: %v", line, err)
					}
					return n
				}
				var k []byte
				switch f[0] {
				case "super":
					k = superKey(f[1])
				case "inode":
					k = inodeKey(num(1))
				case "dentry":
					k = dentryKey(num(1), f[2])
				case "block":
					k = blockKey(num(1), num(2))
				case "xattr":
					k = xattrKey(num(1), f[2])
				case "symlink":
					k = symlinkKey(num(1))
				case "orphan":
					k = orphanKey(num(1))
				default:
					t.Fatalf("unknown family %q", f[0])
				}
				key, err := DecodeKey(k)
				if err != nil {
					t.Fatalf("%s: %v", line, err)
				}
				fmt.Fprintf(&b, "%x -> %s\n", k, key)
			}
		case "decode":
			for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
				k, err := hex.DecodeString(strings.TrimSpace(line))
				if err != nil {
					t.Fatal(err)
				}
				key, err := DecodeKey(k)
				if err != nil {
					fmt.Fprintf(&b, "%s -> error (corrupt=%v): %v\n", line, errors.Is(err, ErrCorrupt), err)
				} else {
					fmt.Fprintf(&b, "%s -> %s\n", line, key)
				}
			}
		case "ranges":
			for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
				f := strings.Fields(line)
				n, _ := strconv.ParseUint(f[1], 10, 64)
				var lo, hi []byte
				switch f[0] {
				case "dentries":
					lo, hi = dentryRange(n)
				case "xattrs":
					lo, hi = xattrRange(n)
				case "blocks":
					lo, hi = blockRange(n, 0, 0)
				}
				fmt.Fprintf(&b, "%s [%x, %x)\n", line, lo, hi)
			}
		default:
			t.Fatalf("unknown command %q", d.Cmd)
		}
		return b.String()
	})
}

func TestPrefixEnd(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"a", "b"}, {"a\xff", "b"}, {"\xff\xff", ""}, {"ab\x00", "ab\x01"},
	} {
		if got := string(prefixEnd([]byte(c.in))); got != c.want {
			t.Errorf("prefixEnd(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
