//go:build race

package sstable_test

// raceEnabled slows the exhaustive tests down, so they sample.
const raceEnabled = true
