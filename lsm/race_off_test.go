//go:build !race

package lsm_test

const raceEnabled = false
