//go:build race

package lsm_test

// raceEnabled: the race detector slows the engine about tenfold, so the
// randomized tests run shorter streams under it.
const raceEnabled = true
