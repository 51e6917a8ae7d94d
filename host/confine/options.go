package confine

// Options are what the host adds to every policy.
type Options struct {
	// Hide are directories a confined command must not see (the host's
	// runtime directory: its HTTP token, control socket, other owners'
	// spill files): each is covered by an empty read-only tmpfs.
	Hide []string
	// Show are directories inside Hide a command may still read (its
	// owner's spill files, which the model is told to read): each is
	// bound read-only back at its path.
	Show []string
	// ReadOnly are paths kept read-only even inside a writable root (the
	// plugin binaries the host runs).
	ReadOnly []string
	// Tmp is the owner's private temporary folder (made by [Temps]; ""
	// for none): in workspace-write mode its tmp is the command's /tmp
	// and TMPDIR, its shm the command's /dev/shm.
	Tmp string
	// Owner is whose commands these are (the host's owner id): a proxied
	// policy's proxy is the owner's own, its events tagged with it.
	Owner string
}
