package memtable

import (
	"fmt"
	"testing"
)

// TestKeyFilter: every added key is reported (also when far more keys are
// added than the filter was sized for), and at the expected count few
// absent keys are.
func TestKeyFilter(t *testing.T) {
	for _, c := range []struct{ sized, added int }{{1, 1}, {100, 100}, {10000, 10000}, {100, 5000}} {
		f := newKeyFilter(c.sized)
		for i := range c.added {
			f.add(hashKey(fmt.Appendf(nil, "key-%d", i)))
		}
		for i := range c.added {
			if !f.mayContain(hashKey(fmt.Appendf(nil, "key-%d", i))) {
				t.Fatalf("sized %d, %d added: key-%d not reported", c.sized, c.added, i)
			}
		}
		if c.sized != c.added || c.added < 1000 {
			continue
		}
		fp := 0
		const absent = 100000
		for i := range absent {
			if f.mayContain(hashKey(fmt.Appendf(nil, "other-%d", i))) {
				fp++
			}
		}
		if rate := float64(fp) / absent; rate > 0.03 {
			t.Fatalf("false-positive rate %.4f at %d keys", rate, c.added)
		}
	}
}
