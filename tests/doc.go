// Package tests holds lsmfs's end-to-end tests: they build the lsmfs binary
// once (TestMain), make filesystems in t.TempDir() with `lsmfs mkfs`, mount
// them through the daemon (`lsmfs mount`, which returns once the kernel
// serves the mount), drive them with ordinary tools and syscalls from the test
// process, and in cleanup unmount, check that the daemon exited and the mount
// is gone, and run `lsmfs fsck`.
//
// They need root, /dev/fuse and fusermount3 (package fuse3), and also git,
// tar, find, du, losetup, unshare and mount (util-linux); without root or
// /dev/fuse each test skips saying so.
//
// The default run is short. LSMFS_LONG=1 makes it long: more crash
// iterations, more random operations. LSMFS_SEED=N
// replays the randomized tests (their seed is logged).
package tests
