package blockcache_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports keeps blockcache at the bottom of the package graph: it
// imports nothing of ours.
func TestImports(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go tool")
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err) // a layering check must not vanish
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/lsmfs/lsmfs/") && p != "github.com/lsmfs/lsmfs/blockcache" {
			t.Errorf("blockcache depends on %s", p)
		}
	}
}
