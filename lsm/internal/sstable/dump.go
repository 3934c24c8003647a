package sstable

import (
	"bufio"
	"fmt"
	"io"
	"unicode/utf8"
)

// Dump writes a human-readable description of the table: footer, metaindex,
// properties, filter, range tombstones, index, and every data block's
// entries (`lsmfs debug sstable dump`). Data blocks are read from the file,
// bypassing the cache, and checked; Dump stops at the first corrupt block
// and returns its error after printing what it could.
func Dump(w io.Writer, r *Reader) error {
	bw := bufio.NewWriter(w)
	err := dump(bw, r)
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	return err
}

func dump(w *bufio.Writer, r *Reader) error {
	ft := r.footer
	fmt.Fprintf(w, "sstable %s: %d bytes\n", r.name, r.size)
	fmt.Fprintf(w, "footer (offset %d): version %d, metaindex %s, index %s\n",
		r.size-footerLen, ft.version, fmtHandle(ft.metaindex), fmtHandle(ft.index))
	fmt.Fprintf(w, "metaindex:\n")
	for _, e := range r.metaIndex {
		fmt.Fprintf(w, "  %s: %s\n", e.name, fmtHandle(e.handle))
	}
	fmt.Fprintf(w, "properties:\n")
	r.props.writeTo(w, "  ")
	if r.hasFilter {
		fmt.Fprintf(w, "filter: bloom, %d bits, %d probes\n", r.filter.nbits, r.filter.k)
	} else {
		fmt.Fprintf(w, "filter: none\n")
	}
	fmt.Fprintf(w, "range tombstones: %d\n", len(r.tombstones))
	for _, t := range r.tombstones {
		fmt.Fprintf(w, "  [%q, %q)#%d\n", t.Start, t.End, t.Seq)
	}
	n := r.index.len()
	fmt.Fprintf(w, "index: %d data blocks\n", n)
	for i := range n {
		fmt.Fprintf(w, "  %d: %s -> %s\n", i, fmtEncodedKey(r.index.key(i)), fmtHandle(r.index.handles[i]))
	}
	var c blockChecker
	for i := range n {
		h := r.index.handles[i]
		stored, typ, _, err := r.readRaw(h, nil, "data")
		if err != nil {
			fmt.Fprintf(w, "block %d: %v\n", i, err)
			return err
		}
		b, _, err := r.decodeStored(h, stored, typ, nil, "data")
		if err == nil {
			err = r.checkDataBlock(i, b, &c)
		}
		if err != nil {
			fmt.Fprintf(w, "block %d: %v\n", i, err)
			return err
		}
		var it blockIter
		it.init(b)
		fmt.Fprintf(w, "block %d: offset %d, stored %d bytes (%s), decoded %d bytes, %d restart points\n",
			i, h.offset, h.length, compressionName(typ), len(b), it.numRestarts)
		for ok := it.first(); ok; ok = it.next() {
			fmt.Fprintf(w, "  %s = %s\n", it.ikey, fmtValue(it.val))
		}
	}
	return nil
}

func compressionName(typ byte) string {
	switch typ {
	case compressionNone:
		return "none"
	case compressionLZ4:
		return "lz4"
	}
	return fmt.Sprintf("type %d", typ)
}

func fmtHandle(h blockHandle) string {
	return fmt.Sprintf("[%d, +%d]", h.offset, h.length)
}

func fmtEncodedKey(k []byte) string {
	if len(k) < 8 {
		return fmt.Sprintf("%q (short key)", k)
	}
	return decodeKeyString(k)
}

// fmtValue quotes a value, shortening long ones.
func fmtValue(v []byte) string {
	const max = 48
	if len(v) <= max {
		return fmt.Sprintf("%q", v)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return fmt.Sprintf("%q... (%d bytes)", v[:cut], len(v))
}
