// Package randid makes the unguessable ids dsh hands out: owners, resume
// handles, job and terminal handles, task ids, request states.
package randid

import (
	"crypto/rand"
	"encoding/hex"
)

// New is 128 random bits in hex (32 digits).
func New() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b[:])
}
