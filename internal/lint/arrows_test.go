package lint_test

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/lsmfs/lsmfs"

// layer returns the rank of a package of ours: a package may import only
// packages of a lower rank, or of its own family (a package and its
// subpackages). Unknown packages (tests/, internal/) have no rank.
func layer(pkg string) (family string, rank int, ok bool) {
	rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
	top := strings.SplitN(rel, "/", 2)[0]
	switch top {
	case "journal", "blockcache":
		return top, 0, true
	case "lsm":
		return top, 1, true
	case "fs":
		return top, 2, true
	case "mount":
		return top, 3, true
	case "cmd":
		return top, 4, true
	}
	return top, 0, false
}

type pkgInfo struct {
	ImportPath string
	Imports    []string
}

// TestArrowsPointDown fails on an import that points up the stack, or from
// journal/ or blockcache/ into any package of ours.
func TestArrowsPointDown(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	checked := 0
	for {
		var p pkgInfo
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		fam, rank, ok := layer(p.ImportPath)
		if !ok {
			continue
		}
		checked++
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			ifam, irank, iok := layer(imp)
			switch {
			case !iok:
				t.Errorf("%s imports %s, which is outside the layer stack", p.ImportPath, imp)
			case ifam == fam:
			case fam == "journal" || fam == "blockcache":
				t.Errorf("%s imports %s: journal/ and blockcache/ import nothing of ours", p.ImportPath, imp)
			case irank >= rank:
				t.Errorf("%s (layer %d) imports %s (layer %d): arrows point down only", p.ImportPath, rank, imp, irank)
			}
		}
	}
	if checked < 5 {
		t.Fatalf("checked only %d packages; is go list working?", checked)
	}
}
