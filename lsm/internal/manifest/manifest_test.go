package manifest_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
	"github.com/lsmfs/lsmfs/lsm/internal/manifest"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

func sampleEdits() []*manifest.Edit {
	id := [16]byte{1, 2, 3}
	jp := "/dev/loop1"
	return []*manifest.Edit{
		{FormatVersion: manifest.FormatVersion, UUID: &id, JournalPath: &jp, NextFileNum: 7, LastSeq: 100, JournalLSN: 9},
		{Added: []manifest.NewFile{{Level: 0, Meta: &manifest.FileMetadata{FileNum: 5, Size: 4096, Smallest: []byte("a"), Largest: []byte("m"), LargestExclusive: true, SmallestSeq: 1, LargestSeq: 50}}}},
		{Deleted: []manifest.DeletedFile{{Level: 0, FileNum: 5}}, Added: []manifest.NewFile{{Level: 1, Meta: &manifest.FileMetadata{FileNum: 6, Size: 1, Smallest: []byte("a"), Largest: []byte("z"), SmallestSeq: 1, LargestSeq: 50}}}, NextFileNum: 8},
		{VlogSealed: []manifest.VlogSegment{{Num: 3, Bytes: 64 << 20}}, VlogDiscard: []manifest.VlogSegment{{Num: 3, Bytes: 4096}}, VlogDeleted: []uint64{2}},
	}
}

func writeManifest(t testing.TB, edits []*manifest.Edit) []byte {
	fs := vfs.NewMem()
	f, err := fs.Create("m")
	if err != nil {
		t.Fatal(err)
	}
	w, err := manifest.NewWriter(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range edits {
		if err := w.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	data, err := manifest.ReadFile(fs, "m")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestRoundTrip(t *testing.T) {
	edits := sampleEdits()
	got, err := manifest.ReadAll("m", writeManifest(t, edits))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, edits) {
		t.Fatalf("got\n%v\nwant\n%v", got, edits)
	}
}

// TestTornTail cuts the file at every length: the log always decodes to a
// prefix of the edits, without error.
func TestTornTail(t *testing.T) {
	edits := sampleEdits()
	data := writeManifest(t, edits)
	for n := 8; n < len(data); n++ {
		got, err := manifest.ReadAll("m", data[:n])
		if err != nil {
			t.Fatalf("cut at %d: %v", n, err)
		}
		for i := range got {
			if !reflect.DeepEqual(got[i], edits[i]) {
				t.Fatalf("cut at %d: edit %d differs", n, i)
			}
		}
	}
}

// TestFlips flips every byte: the result is an error matching ErrCorrupt, or,
// for a flip in the final record's payload (indistinguishable from a torn
// append), every edit but the last.
func TestFlips(t *testing.T) {
	edits := sampleEdits()
	data := writeManifest(t, edits)
	for i := range data {
		bad := append([]byte(nil), data...)
		bad[i] ^= 0x40
		got, err := manifest.ReadAll("m", bad)
		if err != nil {
			if !errors.Is(err, base.ErrCorrupt) {
				t.Fatalf("flip at %d: error %v does not match ErrCorrupt", i, err)
			}
			continue
		}
		if len(got) != len(edits)-1 || !reflect.DeepEqual(got, edits[:len(got):len(got)]) {
			t.Fatalf("flip at %d undetected: %v", i, got)
		}
	}
}

func TestCurrent(t *testing.T) {
	b := manifest.EncodeCurrent(42)
	n, err := manifest.DecodeCurrent(b)
	if err != nil || n != 42 {
		t.Fatalf("got %d %v", n, err)
	}
	for i := range b {
		bad := append([]byte(nil), b...)
		bad[i] ^= 1
		if _, err := manifest.DecodeCurrent(bad); !errors.Is(err, base.ErrCorrupt) {
			t.Fatalf("flip at %d of CURRENT: %v", i, err)
		}
	}
}

func FuzzManifestEdit(f *testing.F) {
	for _, e := range sampleEdits() {
		f.Add(e.Encode(nil))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := manifest.DecodeEdit(b)
		if err != nil {
			if !errors.Is(err, manifest.ErrBadEdit) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		// Re-encoding a decoded edit decodes to the same edit.
		e2, err := manifest.DecodeEdit(e.Encode(nil))
		if err != nil || !reflect.DeepEqual(e, e2) {
			t.Fatalf("re-decode: %v", err)
		}
	})
}

func FuzzManifestLog(f *testing.F) {
	f.Add(writeManifest(f, sampleEdits()))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := manifest.ReadAll("m", b); err != nil && !errors.Is(err, base.ErrCorrupt) {
			t.Fatalf("untyped error %v", err)
		}
	})
}

func FuzzCurrent(f *testing.F) {
	f.Add(manifest.EncodeCurrent(1))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := manifest.DecodeCurrent(b); err != nil && !errors.Is(err, base.ErrCorrupt) {
			t.Fatalf("untyped error %v", err)
		}
	})
}

// TestTornHeader: a header torn by the last append (scribbled, not zero)
// ends the log; the same damage before a valid record is corruption.
func TestTornHeader(t *testing.T) {
	edits := sampleEdits()
	data := writeManifest(t, edits)
	last := len(writeManifest(t, edits[:len(edits)-1])) // start of the last record
	bad := append([]byte(nil), data...)
	bad[last+2] ^= 0x55 // in the last record's header
	got, err := manifest.ReadAll("m", bad)
	if err != nil || len(got) != len(edits)-1 {
		t.Fatalf("torn last header: %d edits, %v", len(got), err)
	}
	first := len(writeManifest(t, nil)) // start of the first record
	bad = append([]byte(nil), data...)
	bad[first+2] ^= 0x55
	if _, err := manifest.ReadAll("m", bad); !errors.Is(err, base.ErrCorrupt) {
		t.Fatalf("bad first header: %v", err)
	}
}

// TestResumeAfterTornTail: cut at every length, a manifest resumed at its
// valid end (ReadAllLen, ResumeWriter) and appended to reads back as the
// edits before the cut followed by the new one: no record follows a torn
// tail.
func TestResumeAfterTornTail(t *testing.T) {
	edits := sampleEdits()
	data := writeManifest(t, edits)
	extra := &manifest.Edit{NextFileNum: 99}
	for n := 8; n <= len(data); n++ {
		fs := vfs.NewMem()
		f, err := fs.Create("m")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(data[:n], 0); err != nil {
			t.Fatal(err)
		}
		before, valid, err := manifest.ReadAllLen("m", data[:n])
		if err != nil {
			t.Fatalf("cut at %d: %v", n, err)
		}
		w, err := manifest.ResumeWriter(f, valid)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Append(extra); err != nil {
			t.Fatal(err)
		}
		w.Close()
		again, err := manifest.ReadFile(fs, "m")
		if err != nil {
			t.Fatal(err)
		}
		got, err := manifest.ReadAll("m", again)
		if err != nil {
			t.Fatalf("cut at %d, resumed: %v", n, err)
		}
		if want := append(before, extra); !reflect.DeepEqual(got, want) {
			t.Fatalf("cut at %d, resumed: %d edits, want %d", n, len(got), len(want))
		}
	}
}
