//go:build !race

package sstable_test

const raceEnabled = false
