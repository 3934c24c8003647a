package fs

import "github.com/hanwen/go-fuse/v2/fuse"

// Interface assertions: every one in the package lives here.
var _ fuse.RawFileSystem = (*FS)(nil)
