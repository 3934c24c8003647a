package fs

// POSIX access control lists in the kernel's xattr representation, and the
// mode arithmetic the kernel leaves to a FUSE filesystem that negotiates
// FUSE_POSIX_ACL (node_acl.go applies it).
//
// Layout of a system.posix_acl_access or system.posix_acl_default value
// (little-endian; the kernel's posix_acl_xattr format, stored as given):
//
//	+-------------+---------------------------------------------+
//	| version u32 | entries: { tag u16 | perm u16 | id u32 } ... |
//	+-------------+---------------------------------------------+
//
// version is 2. Entries are ordered USER_OBJ, USER..., GROUP_OBJ,
// GROUP..., MASK, OTHER; a MASK is required when there are USER or GROUP
// entries. perm holds the rwx bits (4, 2, 1); id is a uid or gid for USER
// and GROUP entries and undefined (0xffffffff) otherwise.

import (
	"encoding/binary"
	"syscall"
)

// ACL xattr names.
const (
	xattrACLAccess  = "system.posix_acl_access"
	xattrACLDefault = "system.posix_acl_default"
)

// aclVersion is the xattr format version (POSIX_ACL_XATTR_VERSION).
const aclVersion = 2

// ACL entry tags.
const (
	aclUserObj  = 0x01
	aclUser     = 0x02
	aclGroupObj = 0x04
	aclGroup    = 0x08
	aclMask     = 0x10
	aclOther    = 0x20
)

// aclUndefinedID is the id of entries that name no user or group.
const aclUndefinedID = 0xffffffff

// maxACLEntries bounds an ACL: the kernel sends at most a page of entries.
const maxACLEntries = (4096 - 4) / 8

type aclEntry struct {
	tag, perm uint16
	id        uint32
}

type acl []aclEntry

// isACLName reports whether name is one of the two ACL xattrs.
func isACLName(name string) bool { return name == xattrACLAccess || name == xattrACLDefault }

// parseACL decodes and validates an ACL xattr value: EINVAL if it is not
// one the kernel would accept (posix_acl_valid's rules). An ACL with no
// entries decodes to nil.
func parseACL(v []byte) (acl, error) {
	if len(v) < 4 || (len(v)-4)%8 != 0 || binary.LittleEndian.Uint32(v) != aclVersion {
		return nil, syscall.EINVAL
	}
	n := (len(v) - 4) / 8
	if n == 0 {
		return nil, nil
	}
	if n > maxACLEntries {
		return nil, syscall.E2BIG
	}
	a := make(acl, n)
	for i := range a {
		e := v[4+8*i:]
		a[i] = aclEntry{
			tag:  binary.LittleEndian.Uint16(e),
			perm: binary.LittleEndian.Uint16(e[2:]),
			id:   binary.LittleEndian.Uint32(e[4:]),
		}
	}
	if !a.valid() {
		return nil, syscall.EINVAL
	}
	return a, nil
}

// valid checks entry order and presence as the kernel's posix_acl_valid.
func (a acl) valid() bool {
	const done = 0
	state := aclUserObj
	needsMask := false
	for _, e := range a {
		if e.perm&^7 != 0 {
			return false
		}
		switch e.tag {
		case aclUserObj:
			if state != aclUserObj {
				return false
			}
			state = aclUser
		case aclUser:
			if state != aclUser {
				return false
			}
			needsMask = true
		case aclGroupObj:
			if state != aclUser {
				return false
			}
			state = aclGroup
		case aclGroup:
			if state != aclGroup {
				return false
			}
			needsMask = true
		case aclMask:
			if state != aclGroup {
				return false
			}
			state = aclOther
		case aclOther:
			if state != aclOther && (state != aclGroup || needsMask) {
				return false
			}
			state = done
		default:
			return false
		}
	}
	return state == done
}

// encode returns the xattr value of a.
func (a acl) encode() []byte {
	v := binary.LittleEndian.AppendUint32(make([]byte, 0, 4+8*len(a)), aclVersion)
	for _, e := range a {
		v = binary.LittleEndian.AppendUint16(v, e.tag)
		v = binary.LittleEndian.AppendUint16(v, e.perm)
		v = binary.LittleEndian.AppendUint32(v, e.id)
	}
	return v
}

// equivMode returns the permission bits a grants through the mode (owner
// from USER_OBJ, group from MASK if there is one and GROUP_OBJ otherwise,
// other from OTHER) and whether a says nothing more than those bits (then
// it need not be stored), as the kernel's posix_acl_equiv_mode.
func (a acl) equivMode() (perm uint32, equiv bool) {
	equiv = true
	for _, e := range a {
		p := uint32(e.perm)
		switch e.tag {
		case aclUserObj:
			perm |= p << 6
		case aclGroupObj:
			perm |= p << 3
		case aclOther:
			perm |= p
		case aclMask:
			perm = perm&^0o070 | p<<3
			equiv = false
		default:
			equiv = false
		}
	}
	return perm, equiv
}

// chmod makes a agree with the permission bits of mode, as chmod(2) does
// to a file's access ACL (posix_acl_chmod): USER_OBJ takes the owner bits,
// MASK (or GROUP_OBJ without a mask) the group bits, OTHER the other bits.
func (a acl) chmod(mode uint32) {
	hasMask := false
	for _, e := range a {
		hasMask = hasMask || e.tag == aclMask
	}
	for i := range a {
		e := &a[i]
		switch {
		case e.tag == aclUserObj:
			e.perm = uint16(mode>>6) & 7
		case e.tag == aclMask, e.tag == aclGroupObj && !hasMask:
			e.perm = uint16(mode>>3) & 7
		case e.tag == aclOther:
			e.perm = uint16(mode) & 7
		}
	}
}

// createMasq turns a copy of a directory's default ACL into the access ACL
// of a new inode created with mode (posix_acl_create_masq): each class of
// the ACL is limited by the mode's bits and the mode's bits by the ACL. It
// returns the new mode (type and special bits kept) and whether the ACL
// says nothing more than the mode.
func (a acl) createMasq(mode uint32) (uint32, bool) {
	m := mode & 0o777
	var groupObj, mask *aclEntry
	equiv := true
	for i := range a {
		e := &a[i]
		switch e.tag {
		case aclUserObj:
			e.perm &= uint16(m>>6) & 7
			m &= uint32(e.perm)<<6 | ^uint32(0o700)
		case aclUser, aclGroup:
			equiv = false
		case aclGroupObj:
			groupObj = e
		case aclOther:
			e.perm &= uint16(m) & 7
			m &= uint32(e.perm) | ^uint32(0o007)
		case aclMask:
			mask = e
			equiv = false
		}
	}
	cls := mask
	if cls == nil {
		cls = groupObj
	}
	if cls != nil {
		cls.perm &= uint16(m>>3) & 7
		m &= uint32(cls.perm)<<3 | ^uint32(0o070)
	}
	return mode&^0o777 | m, equiv
}

// clone returns a copy of a.
func (a acl) clone() acl { return append(acl(nil), a...) }
