package fs_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// TestNoSpaceNamespaceModel: every namespace and attribute operation is one
// engine batch, so one that fails (ENOSPC from the value log or a table,
// where the inode records of these options go) changes nothing: creates,
// mkdir, symlinks, hard links, unlink, rmdir, renames (also over a file),
// chmod, setxattr and removexattr run against a model of the tree while
// random writes fail, and after each step every directory lists the
// model's names and every inode shows its mode, link count and xattrs.
// After the injection stops, the tree must be the model's after fsck and
// a remount.
func TestNoSpaceNamespaceModel(t *testing.T) {
	base := testSeed(t)
	for round := 0; round < 6; round++ {
		seed := base + uint64(round)
		t.Run(fmt.Sprint(seed), func(t *testing.T) { noSpaceNamespace(t, seed) })
	}
}

// nsNode is an inode of the model.
type nsNode struct {
	dir     bool
	symlink bool
	mode    uint32 // permission bits
	nlink   uint32
	xattrs  map[string]string
	entries map[string]uint64 // directories: name -> inode
	parent  uint64            // directories
}

func noSpaceNamespace(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0xd1e))
	mem := vfs.NewMem()
	e, efs := faultEnv(t, csEngineOptions(nil), mem)
	p := []float64{0.1, 0.3, 0.6}[rng.IntN(3)]
	efs.SetInjector(randomNoSpace(seed^0xd1e, p))

	nodes := map[uint64]*nsNode{1: {dir: true, mode: 0o755, nlink: 2, entries: map[string]uint64{}, parent: 1}}
	var log []string
	stats := map[string]int{}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d: %s; last ops %v", seed, fmt.Sprintf(format, args...), log[max(0, len(log)-10):])
	}
	ok := func(what, detail string, errno syscall.Errno, want syscall.Errno) bool {
		t.Helper()
		log = append(log, fmt.Sprintf("%s %s=%v", what, detail, errno))
		switch errno {
		case want:
			stats[what]++
			return errno == 0
		case syscall.ENOSPC:
			stats[what+" ENOSPC"]++
			return false
		}
		fail("%s %s: errno %v, want %v or ENOSPC", what, detail, errno, want)
		return false
	}
	pick := func(cond func(*nsNode) bool) uint64 {
		var inos []uint64
		for ino, n := range nodes {
			if cond(n) {
				inos = append(inos, ino)
			}
		}
		if len(inos) == 0 {
			return 0
		}
		slices.Sort(inos)
		return inos[rng.IntN(len(inos))]
	}
	isDir := func(n *nsNode) bool { return n.dir }
	anyNode := func(*nsNode) bool { return true }
	// entry picks a name in a random directory, existing or not.
	entry := func() (uint64, string) {
		d := pick(isDir)
		if names := slices.Sorted(func(yield func(string) bool) {
			for n := range nodes[d].entries {
				if !yield(n) {
					return
				}
			}
		}); len(names) > 0 && rng.IntN(3) > 0 {
			return d, names[rng.IntN(len(names))]
		}
		return d, fmt.Sprint("n", rng.IntN(40))
	}
	// under reports whether a is b or lies below it.
	under := func(a, b uint64) bool {
		for {
			if a == b {
				return true
			}
			if a == 1 {
				return false
			}
			a = nodes[a].parent
		}
	}
	drop := func(ino uint64) {
		n := nodes[ino]
		if n.nlink == 0 || n.dir && n.nlink <= 1 {
			delete(nodes, ino)
		}
	}
	for step := 0; step < 300; step++ {
		switch op := rng.IntN(11); op {
		case 0, 1: // create, mkdir or symlink
			d, name := entry()
			_, exists := nodes[d].entries[name]
			want := syscall.Errno(0)
			if exists {
				want = syscall.EEXIST
			}
			var ino uint64
			var errno syscall.Errno
			n := &nsNode{mode: 0o640, nlink: 1}
			switch rng.IntN(3) {
			case 0:
				var fh uint64
				ino, fh, errno = e.create(d, name, 0o640, syscall.O_RDWR)
				if errno == 0 {
					e.release(ino, fh)
				}
			case 1:
				ino, errno = e.mkdir(d, name, 0o750)
				n = &nsNode{dir: true, mode: 0o750, nlink: 2, entries: map[string]uint64{}, parent: d}
			default:
				ino, errno = e.symlink(d, "target-"+name, name)
				n = &nsNode{symlink: true, mode: 0o777, nlink: 1}
			}
			if ok("create", fmt.Sprintf("%d/%s", d, name), errno, want) {
				nodes[ino] = n
				nodes[d].entries[name] = ino
				if n.dir {
					nodes[d].nlink++
				}
			}
		case 2: // hard link
			src := pick(func(n *nsNode) bool { return !n.dir })
			if src == 0 {
				continue
			}
			d, name := entry()
			want := syscall.Errno(0)
			if _, exists := nodes[d].entries[name]; exists {
				want = syscall.EEXIST
			}
			_, errno := e.link(src, d, name)
			if ok("link", fmt.Sprintf("%d to %d/%s", src, d, name), errno, want) {
				nodes[src].nlink++
				nodes[d].entries[name] = src
			}
		case 3, 4: // unlink or rmdir
			d, name := entry()
			ino, exists := nodes[d].entries[name]
			if !exists {
				continue
			}
			n := nodes[ino]
			if n.dir {
				want := syscall.Errno(0)
				if len(n.entries) > 0 {
					want = syscall.ENOTEMPTY
				}
				if ok("rmdir", fmt.Sprintf("%d/%s", d, name), e.rmdir(d, name), want) {
					delete(nodes[d].entries, name)
					nodes[d].nlink--
					n.nlink = 0
					drop(ino)
				}
				continue
			}
			if ok("unlink", fmt.Sprintf("%d/%s", d, name), e.unlink(d, name), 0) {
				delete(nodes[d].entries, name)
				n.nlink--
				drop(ino)
			}
		case 5, 6: // rename, to a new name or over a file
			od, oname := entry()
			ino, exists := nodes[od].entries[oname]
			if !exists {
				continue
			}
			nd, nname := entry()
			n := nodes[ino]
			target, over := nodes[nd].entries[nname]
			if target == ino || n.dir && under(nd, ino) || over && (nodes[target].dir || n.dir) {
				continue // the same inode, a loop, or a directory involved: not modelled
			}
			if ok("rename", fmt.Sprintf("%d/%s to %d/%s", od, oname, nd, nname), e.rename(od, oname, nd, nname, 0), 0) {
				delete(nodes[od].entries, oname)
				nodes[nd].entries[nname] = ino
				if over {
					nodes[target].nlink--
					drop(target)
				}
				if n.dir {
					nodes[od].nlink--
					nodes[nd].nlink++
					n.parent = nd
				}
			}
		case 7: // chmod
			ino := pick(func(n *nsNode) bool { return !n.symlink })
			mode := uint32(rng.IntN(0o1000))
			var in fuse.SetAttrIn
			in.NodeId, in.Valid, in.Mode = ino, fuse.FATTR_MODE, mode
			_, errno := e.setattr(in)
			if ok("chmod", fmt.Sprintf("%d %#o", ino, mode), errno, 0) {
				nodes[ino].mode = mode
			}
		case 8, 9: // setxattr
			ino := pick(func(n *nsNode) bool { return !n.symlink })
			name := fmt.Sprint("user.x", rng.IntN(4))
			value := strings.Repeat(fmt.Sprint(step), 1+rng.IntN(40))
			if ok("setxattr", fmt.Sprintf("%d %s", ino, name), e.setxattr(ino, name, []byte(value), 0), 0) {
				if nodes[ino].xattrs == nil {
					nodes[ino].xattrs = map[string]string{}
				}
				nodes[ino].xattrs[name] = value
			}
		default: // removexattr
			ino := pick(anyNode)
			var names []string
			for name := range nodes[ino].xattrs {
				names = append(names, name)
			}
			if len(names) == 0 {
				continue
			}
			slices.Sort(names)
			name := names[rng.IntN(len(names))]
			if ok("removexattr", fmt.Sprintf("%d %s", ino, name), e.removexattr(ino, name), 0) {
				delete(nodes[ino].xattrs, name)
			}
		}
		compareNamespace(t, e, nodes, fail)
	}
	efs.Enable(false)
	stats["injected"] = int(efs.Injected())
	if err := e.db.Flush(); err != nil { // retries at once what failed
		fail("flush after the injection: %v", err)
	}
	e.check()
	e.remount()
	e.check()
	compareNamespace(t, e, nodes, fail)
	t.Logf("p %.1f: %v", p, stats)
}

// compareNamespace checks that every directory of the model lists its
// names and every inode shows the model's mode, link count and xattrs.
func compareNamespace(t *testing.T, e *env, nodes map[uint64]*nsNode, fail func(string, ...any)) {
	t.Helper()
	for ino, n := range nodes {
		a, errno := e.getattr(ino)
		if errno != 0 {
			fail("getattr %d: %v", ino, errno)
		}
		if a.Mode&0o7777 != n.mode || a.Nlink != n.nlink {
			fail("ino %d: mode %#o nlink %d, model %#o and %d", ino, a.Mode&0o7777, a.Nlink, n.mode, n.nlink)
		}
		if n.dir {
			var want []string
			for name := range n.entries {
				want = append(want, name)
			}
			slices.Sort(want)
			got := e.names(ino)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				fail("dir %d lists %v, model %v", ino, got, want)
			}
		}
		if n.symlink {
			continue
		}
		buf, _, errno := e.listxattr(ino, 4096)
		if errno != 0 {
			fail("listxattr %d: %v", ino, errno)
		}
		var got []string
		for _, name := range strings.Split(string(buf), "\x00") {
			if name != "" {
				got = append(got, name)
			}
		}
		slices.Sort(got)
		var want []string
		for name, value := range n.xattrs {
			want = append(want, name)
			if v, _, errno := e.getxattr(ino, name, 4096); errno != 0 || string(v) != value {
				fail("getxattr %d %s: %q %v, model %q", ino, name, v, errno, value)
			}
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			fail("ino %d xattrs %v, model %v", ino, got, want)
		}
	}
}
