package sandbox

// Options are what the host adds to every policy.
type Options struct {
	// Hide are directories a confined command must not see (the host's
	// runtime directory: its HTTP token, control socket, other owners'
	// spill files): each is covered by an empty read-only tmpfs.
	Hide []string
}
