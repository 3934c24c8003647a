//go:build race

package journal_test

// raceEnabled: the race detector makes every journal open costly (shadow
// memory for its buffers), so the exhaustive damage tests sample offsets
// under it; the plain run covers every one.
const raceEnabled = true
