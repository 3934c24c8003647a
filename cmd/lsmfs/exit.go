package main

import (
	"errors"
	"strings"
)

// Exit codes. Only main calls os.Exit, with exitCode of Main's error.
const (
	// exitOK: success (fsck: no problems found).
	exitOK = 0
	// exitFailure: an operation failed (mkfs, unmount, a closing error).
	exitFailure = 1
	// exitUsage: bad command line or -o options.
	exitUsage = 2
	// exitFsckFixed: fsck --repair corrected problems and none is left
	// (e2fsck's 1).
	exitFsckFixed = 1
	// exitFsckErrors: fsck found problems and left them uncorrected
	// (e2fsck's 4).
	exitFsckErrors = 4
	// exitFsckOperational: fsck could not check (e2fsck's 8): not an lsmfs
	// data directory, mounted, unreadable.
	exitFsckOperational = 8
	// exitFsckUsage: bad fsck command line (e2fsck's 16).
	exitFsckUsage = 16
	// exitFsckCancelled: fsck was interrupted (e2fsck's 32).
	exitFsckCancelled = 32
	// exitMountFailed: the mount failed, as mount(8) reports it (32).
	exitMountFailed = 32
)

// codeError carries the exit code for an error.
type codeError struct {
	code int
	err  error
}

func (e *codeError) Error() string { return e.err.Error() }
func (e *codeError) Unwrap() error { return e.err }

// withCode attaches an exit code to err (nil stays nil).
func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &codeError{code: code, err: err}
}

// exitCode maps Main's error to the process exit code.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var ce *codeError
	if errors.As(err, &ce) {
		return ce.code
	}
	return exitFailure
}

// oneLine joins the lines of an error message (errors.Join, tool output) so
// that every failure is reported on one line.
func oneLine(err error) string {
	fields := strings.FieldsFunc(err.Error(), func(r rune) bool { return r == '\n' || r == '\r' })
	for i := range fields {
		fields[i] = strings.TrimSpace(fields[i])
	}
	return strings.Join(fields, "; ")
}
