package journal_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoUpwardImports enforces DESIGN.md's arrows: journal/ imports nothing
// else from this module (and only the standard library, lz4 and x/sys).
func TestNoUpwardImports(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not in PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "github.com/lsmfs/lsmfs/journal").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	allowed := []string{"github.com/lsmfs/lsmfs/journal", "github.com/pierrec/lz4/v4", "golang.org/x/sys/"}
	for _, dep := range strings.Fields(string(out)) {
		ok := false
		for _, a := range allowed {
			ok = ok || dep == a || strings.HasPrefix(dep, a)
		}
		if !ok {
			t.Errorf("journal depends on %s", dep)
		}
	}
}
