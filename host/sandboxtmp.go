package host

import "errors"

// An owner's private temporary folder: its sandboxed commands' /tmp and
// TMPDIR (see confine.Temps), made on its first confined command and
// removed with the owner, once its processes are gone.

// ownerTemp is owner's folder for Options.Tmp; "" when there are none.
func (h *Host) ownerTemp(owner string) string {
	if h.temps == nil {
		return ""
	}
	dir, err := h.temps.For(owner)
	if err != nil {
		h.log.Warn("no private temporary folder: the command sees the host's /tmp, read-only", "owner", owner, "error", err)
		return ""
	}
	return dir
}

// releaseTemp closes owner's confinements and network proxies, and
// removes its folder.
func (h *Host) releaseTemp(owner string) error {
	if h.temps == nil {
		return h.runner.Release(owner, "")
	}
	return errors.Join(h.runner.Release(owner, h.temps.Path(owner)), h.temps.Release(owner))
}

func (h *Host) closeTemps() error {
	if h.temps == nil {
		return nil
	}
	return h.temps.Close()
}
