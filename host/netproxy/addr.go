package netproxy

import "net/netip"

var (
	// metadata are the cloud instance metadata services (AWS, GCP, Azure,
	// OpenStack on 169.254.169.254; AWS over IPv6; Alibaba): credentials
	// live there, so no rule reaches them.
	metadata = []netip.Addr{
		netip.MustParseAddr("169.254.169.254"),
		netip.MustParseAddr("fd00:ec2::254"),
		netip.MustParseAddr("100.100.100.200"),
	}
	broadcast   = netip.MustParseAddr("255.255.255.255")
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")
	// nat64 embeds an IPv4 address in its last 32 bits: where NAT64 runs,
	// 64:ff9b::a9fe:a9fe is the metadata service.
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
	// nat64Local is the local-use NAT64 prefix (RFC 8215), translated
	// with a /96 or a shorter RFC 6052 prefix, which puts the IPv4
	// address elsewhere: every place is judged.
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48")
)

// nat64Embedded are the IPv4 addresses an address of nat64Local may carry
// (RFC 6052 section 2.2: prefixes of 48, 56, 64 and 96 bits, the octet of
// bits 64 to 71 skipped).
func nat64Embedded(a netip.Addr) []netip.Addr {
	b := a.As16()
	return []netip.Addr{
		netip.AddrFrom4([4]byte{b[6], b[7], b[9], b[10]}),
		netip.AddrFrom4([4]byte{b[7], b[9], b[10], b[11]}),
		netip.AddrFrom4([4]byte(b[9:13])),
		netip.AddrFrom4([4]byte(b[12:])),
	}
}

// refusedAddr says why a resolved or literal address may not be dialed, or
// "" if it may. trusted addresses (from Rules.Hosts, or an IP literal an
// Allow entry names) may be loopback or link-local; nothing makes the
// metadata, unspecified, multicast or broadcast addresses reachable.
// IPv4-mapped IPv6 addresses are judged as the IPv4 address they carry.
func refusedAddr(a netip.Addr, trusted bool) string {
	a = a.WithZone("").Unmap()
	if nat64.Contains(a) {
		b := a.As16()
		if why := refusedAddr(netip.AddrFrom4([4]byte(b[12:])), trusted); why != "" {
			return why
		}
	}
	if nat64Local.Contains(a) {
		for _, v4 := range nat64Embedded(a) {
			if thisNetwork.Contains(v4) {
				continue // zeros where another layout puts nothing; no translator sends there
			}
			if why := refusedAddr(v4, trusted); why != "" {
				return why
			}
		}
	}
	for _, m := range metadata {
		if a == m {
			return "a cloud metadata address"
		}
	}
	switch {
	case a.IsUnspecified() || a.Is4() && thisNetwork.Contains(a):
		return "an unspecified address"
	case a.IsMulticast():
		return "a multicast address"
	case a == broadcast:
		return "the broadcast address"
	case trusted:
		return ""
	case a.IsLoopback():
		return "a loopback address"
	case a.IsLinkLocalUnicast():
		return "a link-local address"
	}
	return ""
}
