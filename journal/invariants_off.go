//go:build !invariants

package journal

// invariants enables expensive self-checks (go test -tags invariants).
const invariants = false
