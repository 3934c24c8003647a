package lsm

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/lsmfs/lsmfs/lsm/internal/manifest"
)

const numLevels = manifest.NumLevels

// tableMeta is a table's persistent description plus runtime state.
type tableMeta struct {
	*manifest.FileMetadata
	// refs counts the versions that include the table; at zero the file is
	// obsolete and is deleted.
	refs atomic.Int32
	// compacting is set while a compaction has the table as input; guarded
	// by DB.mu.
	compacting bool
}

// version is an immutable set of tables per level. L0 is sorted oldest
// first (by LargestSeq, then file number); L1+ by smallest key, disjoint.
type version struct {
	levels [numLevels][]*tableMeta
	refs   atomic.Int32
	// onObsolete receives tables whose last version reference went away.
	onObsolete func([]*tableMeta)
}

func (v *version) ref() { v.refs.Add(1) }

func (v *version) unref() {
	if v.refs.Add(-1) != 0 {
		return
	}
	var obsolete []*tableMeta
	for _, files := range v.levels {
		for _, f := range files {
			if f.refs.Add(-1) == 0 {
				obsolete = append(obsolete, f)
			}
		}
	}
	if len(obsolete) > 0 && v.onObsolete != nil {
		v.onObsolete(obsolete)
	}
}

// discard drops a version that was built but never installed: its table
// references go, and no table becomes obsolete through it (every table it
// holds is also in the current version or new and unreferenced).
func (v *version) discard() {
	for _, files := range v.levels {
		for _, f := range files {
			f.refs.Add(-1)
		}
	}
}

// String prints the version, a line per table.
func (v *version) String() string {
	var b strings.Builder
	for l, files := range v.levels {
		if len(files) == 0 {
			continue
		}
		fmt.Fprintf(&b, "L%d:\n", l)
		for _, f := range files {
			fmt.Fprintf(&b, "  %s\n", f.FileMetadata)
		}
	}
	return b.String()
}

func (v *version) levelSize(l int) uint64 {
	var n uint64
	for _, f := range v.levels[l] {
		n += f.Size
	}
	return n
}

// overlaps returns the tables of level l that may hold keys in [lo, hi].
func (v *version) overlaps(l int, lo, hi []byte) []*tableMeta {
	var out []*tableMeta
	files := v.levels[l]
	if l == 0 {
		for _, f := range files {
			if f.Overlaps(lo, hi) {
				out = append(out, f)
			}
		}
		return out
	}
	i := 0
	if lo != nil {
		i = searchLevel(files, lo)
	}
	for ; i < len(files); i++ {
		if hi != nil && bytes.Compare(files[i].Smallest, hi) > 0 {
			break
		}
		out = append(out, files[i])
	}
	return out
}

// searchLevel returns the index of the first table in a sorted level whose
// range ends at or after key.
func searchLevel(files []*tableMeta, key []byte) int {
	lo, hi := 0, len(files)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if endsBefore(files[m], key) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// endsBefore reports whether every key of f is < key.
func endsBefore(f *tableMeta, key []byte) bool {
	c := bytes.Compare(f.Largest, key)
	return c < 0 || (c == 0 && f.LargestExclusive)
}

// apply returns a new version: v with the edit's deletions and additions.
// It checks the level invariants and returns an error naming a violation.
func (v *version) apply(e *manifest.Edit, known map[uint64]*tableMeta) (*version, error) {
	nv := &version{onObsolete: v.onObsolete}
	deleted := map[[2]uint64]bool{}
	for _, d := range e.Deleted {
		deleted[[2]uint64{uint64(d.Level), d.FileNum}] = true
	}
	in := map[uint64]int{} // file number -> level, of nv
	for l := range v.levels {
		for _, f := range v.levels[l] {
			if deleted[[2]uint64{uint64(l), f.FileNum}] {
				delete(deleted, [2]uint64{uint64(l), f.FileNum})
				continue
			}
			nv.levels[l] = append(nv.levels[l], f)
			in[f.FileNum] = l
		}
	}
	if len(deleted) > 0 {
		return nil, fmt.Errorf("version edit deletes tables not in the version: %v", deleted)
	}
	for _, a := range e.Added {
		// A table in two places would be deleted from one and then named
		// by the other: "table named by the manifest is missing".
		if l, ok := in[a.Meta.FileNum]; ok {
			return nil, fmt.Errorf("version edit adds table %06d to L%d, but it is in L%d", a.Meta.FileNum, a.Level, l)
		}
		in[a.Meta.FileNum] = a.Level
		t := known[a.Meta.FileNum]
		if t == nil {
			t = &tableMeta{FileMetadata: a.Meta}
		}
		nv.levels[a.Level] = append(nv.levels[a.Level], t)
	}
	slices.SortFunc(nv.levels[0], func(a, b *tableMeta) int {
		if a.LargestSeq != b.LargestSeq {
			if a.LargestSeq < b.LargestSeq {
				return -1
			}
			return 1
		}
		if a.FileNum < b.FileNum {
			return -1
		}
		return 1
	})
	for l := 1; l < numLevels; l++ {
		files := nv.levels[l]
		slices.SortFunc(files, func(a, b *tableMeta) int { return bytes.Compare(a.Smallest, b.Smallest) })
		for i := 1; i < len(files); i++ {
			if !endsBefore(files[i-1], files[i].Smallest) {
				return nil, fmt.Errorf("L%d tables %s and %s overlap", l, files[i-1].FileMetadata, files[i].FileMetadata)
			}
		}
	}
	for _, files := range nv.levels {
		for _, f := range files {
			f.refs.Add(1)
		}
	}
	nv.refs.Store(1)
	return nv, nil
}
